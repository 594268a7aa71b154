//! The failure detector: who is silent for too long, the primary's sign of life to the
//! coordinator, and keeping the config store's leadership off the primary.

use super::*;

/// Ticks over which the longest gap between two arrivals from a peer is taken as one sample.
const ARRIVAL_WINDOW_TICKS: u64 = 64;

/// Windows over which the longest silence a peer came back from fades by about two thirds
/// (1,024 windows of 64 ticks: about a minute at 1 ms ticks).
const STALL_FADE_WINDOWS: u64 = 1024;

/// How irregularly a peer is heard, for the silence it is allowed.
///
/// A peer normally speaks every tick (heartbeats, acks). On a loaded machine a process may
/// not run for several ticks at a time, and a detector that ignores that accuses live peers
/// (each false suspicion on a 2-core machine with one core busy cost up to three view
/// changes). Like TigerBeetle's detector, the allowed silence is a multiple of a moving
/// average: here of the longest gap seen in each window of `ARRIVAL_WINDOW_TICKS`, averaged
/// over windows with weight 1/4, so that stalls that recur every few hundred ticks are
/// remembered.
///
/// Stalls on a busy machine also come in bursts minutes apart (a build linking, another
/// cluster under load): an idle cluster beside a loaded one on two cores made 13 view changes
/// in 3 minutes, each after a silence just past `suspect_ticks` from a peer that was alive.
/// So the longest silence a peer came back from is remembered too, fading over about a
/// minute (`STALL_FADE_WINDOWS`), and the peer may stay silent twice as long before it is
/// suspected: a peer that returned from a silence was alive through it, and the same silence
/// soon after most likely means the same.
///
/// The allowed silence never drops below `suspect_ticks` and never exceeds
/// `SILENCE_STRETCH_MAX` times it, so a silent dead peer is still found within a bound (and a
/// closed connection, which is how a killed process is seen, is acted on at once whatever the
/// silence).
#[derive(Clone, Debug, Default)]
pub(super) struct Arrivals {
    window_started: u64,
    window_gap_max: u64,
    /// The average of the windows' longest gaps, in sixteenths of a tick.
    gap_max_avg_x16: u64,
    /// The longest gap the peer was heard again after, fading by a `STALL_FADE_WINDOWS`th a
    /// window, in 1/`STALL_FADE_WINDOWS` of a tick.
    stall_faded: u64,
}

impl Arrivals {
    /// The peer was heard at `tick`, last before at `tick_last`.
    pub(super) fn heard(&mut self, tick: u64, tick_last: u64) {
        let gap = tick.saturating_sub(tick_last);
        self.window_gap_max = self.window_gap_max.max(gap);
        self.stall_faded = self.stall_faded.max(gap.saturating_mul(STALL_FADE_WINDOWS));
        if tick - self.window_started >= ARRIVAL_WINDOW_TICKS {
            let sample = self.window_gap_max * 16;
            // avg += (sample − avg) / 4, in unsigned arithmetic.
            self.gap_max_avg_x16 = (3 * self.gap_max_avg_x16 + sample) / 4;
            // One fade per window closed, however long it was: a peer heard rarely fades
            // slowly, which errs on the side of patience.
            self.stall_faded -= self.stall_faded / STALL_FADE_WINDOWS;
            self.window_started = tick;
            self.window_gap_max = 0;
        }
    }

    /// The silence after which the peer is suspected: twice the average longest gap, or
    /// twice the longest silence it came back from lately, within
    /// `[suspect_ticks, SILENCE_STRETCH_MAX × suspect_ticks]`.
    pub(super) fn silence_ticks(&self, suspect_ticks: u64) -> u64 {
        let stretched = (2 * self.gap_max_avg_x16).div_ceil(16);
        let after_stalls = self
            .stall_faded
            .saturating_mul(2)
            .div_ceil(STALL_FADE_WINDOWS);
        stretched
            .max(after_stalls)
            .clamp(suspect_ticks, SILENCE_STRETCH_MAX * suspect_ticks)
    }
}

impl Cluster {
    /// The primary tells the coordinator it runs, every tick.
    pub(super) fn maybe_alive(&mut self) {
        if !self.group.serving
            || self.group.is_stalled(&self.node)
            || self.group.member(&self.node) != Member::Primary
        {
            return;
        }
        let view = self
            .group
            .view
            .as_ref()
            .expect("a primary has a view")
            .number;
        if self.node.config.leader() == Some(self.node.settings.node) {
            return;
        }
        let alive = ClusterMessage::Alive {
            group: self.group.id,
            view,
        };
        self.send_coordinator(alive);
    }

    /// The failure detector: silence of `suspect_ticks` makes a suspicion, repeated every
    /// `suspect_ticks` while it lasts.
    pub(super) fn detect(&mut self) {
        // A node without its memory suspects nobody, unless it rebuilt records to report.
        let rebuilt = self.rebuilt_reporting().is_some();
        if !self.group.serving && !rebuilt {
            return;
        }
        let Some(view) = self.group.view.clone() else {
            return;
        };
        let suspect_ticks = self.node.settings.suspect_ticks;
        let suspicion = |closed: bool, ticks: u64, allowed_ticks: u64| {
            if closed {
                Some(Suspicion::Closed)
            } else if ticks >= allowed_ticks {
                Some(Suspicion::Silent {
                    ticks,
                    allowed_ticks,
                })
            } else {
                None
            }
        };
        let suspects: Vec<(NodeId, Suspicion)> = match self.group.member(&self.node) {
            // A spare too, in a view without backups (it may take over: `rule::reporters`).
            // A node that rebuilt records runs no role, so it hears nothing from the primary
            // and has no role start to give a grace for: it suspects it after the usual
            // silence. That is safe: the coordinator confirms only once the primary, alive,
            // has not said so (`Alive`) for its own silence threshold either.
            Member::Backup | Member::Spare
                if self.group.frozen.is_none()
                    && rule::reporters(&view).contains(&self.node.settings.node) =>
            {
                let silence_ticks = if self.group.serving {
                    self.silence_ticks(view.primary)
                } else {
                    suspect_ticks
                };
                suspicion(
                    self.node.closed.contains(&view.primary),
                    self.node.tick - self.group.tick_heard_primary,
                    silence_ticks,
                )
                .map(|why| (view.primary, why))
                .into_iter()
                .collect()
            }
            // Spares too: a silent spare leaves (a restarted node the view names as a spare
            // waits to be left out before it rejoins).
            Member::Primary if self.group.serving => view
                .backups
                .iter()
                .chain(&view.spares)
                .copied()
                .filter_map(|node| {
                    let silent_ticks =
                        self.node.tick - self.group.tick_heard.get(&node).copied().unwrap_or(0);
                    suspicion(
                        self.node.closed.contains(&node),
                        silent_ticks,
                        self.silence_ticks(node),
                    )
                    .map(|why| (node, why))
                })
                .collect(),
            _ => Vec::new(),
        };
        for (suspect, why) in suspects {
            let last = self.group.tick_suspected.get(&suspect).copied();
            if last.is_some_and(|tick| self.node.tick - tick < suspect_ticks) {
                continue;
            }
            if last.is_none() {
                self.push_event(ClusterEvent::Suspected {
                    peer: suspect,
                    view: view.number,
                    why,
                });
            }
            self.group.tick_suspected.insert(suspect, self.node.tick);
            if !view.backups.contains(&suspect) {
                // The primary, or a spare: no rule counts on a spare, nothing to prepare.
                let message = ClusterMessage::Suspect {
                    group: self.group.id,
                    view: view.number,
                    suspect,
                    behind: Vec::new(),
                    joining: Vec::new(),
                };
                self.send_coordinator(message);
            } else {
                // Which backups lack released records is the replication core's to say, at
                // the moment it starts holding replies back for the view asked for.
                self.push_event(ClusterEvent::RemovalWanted {
                    view: view.number,
                    backup: suspect,
                });
            }
        }
    }

    /// The silence after which `peer` is suspected: `suspect_ticks`, stretched by the jitter
    /// observed from it, or the first-contact grace while it has not been heard in the view.
    pub(super) fn silence_ticks(&self, peer: NodeId) -> u64 {
        let suspect_ticks = self.node.settings.suspect_ticks;
        if self.group.contacted.contains(&peer) {
            self.node
                .arrivals
                .get(&peer)
                .map_or(suspect_ticks, |arrivals| {
                    arrivals.silence_ticks(suspect_ticks)
                })
        } else {
            suspect_ticks * FIRST_CONTACT_GRACE
        }
    }

    /// Starts a view change for a backup's recent suspicion of the primary once the
    /// coordinator lost the primary too (no frame when it is a backup that is not frozen, no
    /// `Alive`, for its silence threshold, or a closed connection) and so did every other
    /// backup it hears from, or the suspicion has lasted `RESUME_AFTER_SUSPICIONS` timeouts.
    pub(super) fn maybe_confirm_suspicion(&mut self) {
        let Some(pending) = self.group.suspicion_pending else {
            return;
        };
        let suspect_ticks = self.node.settings.suspect_ticks;
        if pending.is_stale(self.node.tick, suspect_ticks) || !self.node.config.is_leader() {
            // Stale: the backups suspect again while the silence lasts.
            self.group.suspicion_pending = None;
            return;
        }
        let view = self.group.view.as_ref().expect("a suspicion is of a view");
        // The coordinator's own silence threshold for the primary: a suspicion is confirmed
        // only when the coordinator, by its own measure, lost the primary too. A closed
        // connection from the primary confirms at once.
        let silence_ticks = self.silence_ticks(view.primary);
        let lost = self.node.closed.contains(&view.primary);
        let fresh = |tick: u64| !lost && self.node.tick - tick < silence_ticks;
        // A coordinator that is the primary hears itself, if it serves and its data plane
        // makes progress: one that restarted without its memory holds the role in name only
        // (the simulator found a cluster stalled for good by a restarted primary re-elected
        // to lead the config store).
        // A backup hears the primary only through the role it serves.
        let hears_primary = (self.group.member(&self.node) == Member::Primary
            && self.group.serving
            && !self.group.is_stalled(&self.node))
            || (self.group.serving
                && rule::reporters(view).contains(&self.node.settings.node)
                && self.group.frozen.is_none()
                && fresh(self.group.tick_heard_primary))
            || self.group.tick_alive_primary.is_some_and(fresh);
        if hears_primary {
            return;
        }
        // Every other backup the coordinator hears from must have lost the primary too: a
        // backup that is itself starved of CPU (a checksum, a long script, another process)
        // hears nothing of a healthy primary, and when it leads the config store its own
        // word confirmed its own suspicion (a 2-core machine moved its primary several times
        // a second that way). A backup the coordinator no longer hears does not hold the
        // change back: it may be the fault. Nor does one that goes on hearing the primary
        // for `RESUME_AFTER_SUSPICIONS` timeouts while the suspicion lasts: a primary whose
        // link to this coordinator is cut one way can neither reach it to shed this backup
        // nor commit without it.
        let lasting = pending.has_lasted(self.node.tick, suspect_ticks);
        let agreeing = |backup: &NodeId| {
            let suspects = self
                .group
                .tick_backup_suspected
                .get(backup)
                .is_some_and(|&tick| self.node.tick - tick <= 2 * suspect_ticks);
            let silent = *backup != self.node.settings.node
                && self
                    .node
                    .tick_heard_node
                    .get(backup)
                    .is_none_or(|&tick| self.node.tick - tick >= suspect_ticks);
            suspects || silent
        };
        if !lasting && !rule::reporters(view).iter().all(agreeing) {
            return;
        }
        self.group.suspicion_pending = None;
        let view = self.group.view.clone().expect("a suspicion is of a view");
        self.start_collecting(&view);
    }

    /// The config store's leader `peer` closed its connection to this node: its process most
    /// likely died, and every view change now waits for a new leader. Rather than wait out
    /// the election timeout (50 ms and more), one node campaigns at once: the voter with the
    /// lowest id among those that hold a connection to the dead node and so see it close
    /// (in each group, every member if it was the primary, the primary if it was a backup or
    /// a spare). One campaigner, so that two never split the vote. A false alarm (a
    /// connection reset between live nodes) costs the live leader its term, nothing more.
    pub(super) fn campaign_if_leader_closed(&mut self, peer: NodeId) {
        if self.node.config.leader() != Some(peer) {
            return;
        }
        let mut observers = std::collections::BTreeSet::new();
        for view in self.views() {
            if peer == view.primary {
                observers.extend(view.members().filter(|&node| node != peer));
            } else {
                observers.insert(view.primary);
            }
        }
        let campaigner = observers
            .into_iter()
            .find(|node| self.node.settings.voters.contains(node));
        if campaigner == Some(self.node.settings.node) {
            self.node.config.campaign_now();
        }
    }

    /// A new config store leader hears at once the suspicions and the report this node
    /// repeats every `suspect_ticks`: those sent since the last one went to a leader that
    /// may be the dead primary, and waiting for the next repetition would add up to a
    /// suspicion timeout to the view change.
    pub(super) fn follow_leader_change(&mut self) {
        let leader = self.node.config.leader();
        if leader == self.node.leader_known {
            return;
        }
        self.node.leader_known = leader;
        if leader.is_none() {
            return;
        }
        let due = self
            .node
            .tick
            .saturating_sub(self.node.settings.suspect_ticks);
        self.each_group(|core| {
            for tick in core.group.tick_suspected.values_mut() {
                *tick = (*tick).min(due);
            }
            if let Some(frozen) = &mut core.group.frozen
                && let Some(tick) = &mut frozen.tick_reported
            {
                *tick = (*tick).min(due);
            }
            core.detect();
            core.maybe_report();
        });
    }

    /// A leader that is also a group's primary hands leadership to a voter that is the
    /// primary of no group this node knows and a member of a group it leads: if that primary
    /// fails, the view change then needs no Raft election first. Where every voter leads a
    /// group, the leadership stays.
    pub(super) fn keep_leader_off_primary(&mut self) {
        if !self.node.config.is_leader() {
            return;
        }
        let led: Vec<&GroupCore> = self
            .group_cores()
            .filter(|group| group.member(&self.node) == Member::Primary)
            .collect();
        if led.is_empty() {
            return;
        }
        let tick = self.node.tick;
        let suspect_ticks = self.node.settings.suspect_ticks;
        if self
            .node
            .tick_leader_transferred
            .is_some_and(|transferred| tick - transferred < 10 * suspect_ticks)
        {
            return;
        }
        // While it suspects a backup, the primary keeps leading: a transfer stops proposals
        // until it completes, and the view change that removes the backup must go through.
        // Only a recent suspicion counts: one from a node's start that came to nothing once
        // held the leadership on the primary for the whole view, and the primary's death
        // then waited for an election (a failover of 77 ms instead of 9).
        let suspecting = led.iter().any(|group| {
            group
                .tick_suspected
                .values()
                .any(|&suspected| tick - suspected < 2 * suspect_ticks)
        });
        if suspecting {
            return;
        }
        let primaries: Vec<NodeId> = self.views().map(|view| view.primary).collect();
        // Only to a member heard from lately: a transfer to a dead node would stall the
        // config store until the transfer times out, and again at every retry.
        // A spare is as good a leader as a backup: what matters is that it is alive and not
        // a primary.
        let target = led.iter().find_map(|group| {
            let view = group.view.as_ref().expect("a primary has a view");
            view.backups
                .iter()
                .chain(&view.spares)
                .copied()
                .find(|node| {
                    self.node.settings.voters.contains(node)
                        && !primaries.contains(node)
                        && group.contacted.contains(node)
                        && group
                            .tick_heard
                            .get(node)
                            .is_some_and(|&heard| tick - heard < suspect_ticks)
                })
        });
        if let Some(target) = target {
            self.node.tick_leader_transferred = Some(tick);
            self.node.config.transfer_leader(target);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUSPECT_TICKS: u64 = 30;

    /// Hears the peer every tick from `from` to `to`.
    fn steady(arrivals: &mut Arrivals, from: u64, to: u64) {
        for tick in from + 1..=to {
            arrivals.heard(tick, tick - 1);
        }
    }

    #[test]
    fn a_steady_peer_is_allowed_the_least_silence() {
        let mut arrivals = Arrivals::default();
        steady(&mut arrivals, 0, 10_000);
        assert_eq!(arrivals.silence_ticks(SUSPECT_TICKS), SUSPECT_TICKS);
    }

    #[test]
    fn a_peer_back_from_a_silence_is_allowed_twice_it_for_about_a_minute() {
        let mut arrivals = Arrivals::default();
        steady(&mut arrivals, 0, 1_000);
        arrivals.heard(1_035, 1_000);
        steady(&mut arrivals, 1_035, 11_035);
        assert_eq!(
            arrivals.silence_ticks(SUSPECT_TICKS),
            61,
            "ten seconds later, most of the 35-tick stall is remembered"
        );
        steady(&mut arrivals, 11_035, 300_000);
        assert_eq!(
            arrivals.silence_ticks(SUSPECT_TICKS),
            SUSPECT_TICKS,
            "five minutes later it has faded"
        );
    }

    #[test]
    fn a_long_silence_stretches_the_allowance_to_its_bound_and_no_further() {
        let mut arrivals = Arrivals::default();
        arrivals.heard(100_000, 0);
        assert_eq!(
            arrivals.silence_ticks(SUSPECT_TICKS),
            SILENCE_STRETCH_MAX * SUSPECT_TICKS
        );
    }
}
