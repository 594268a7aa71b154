//! The view-change rules (DESIGN.md, "Promotion rule"): pure functions from the old view and
//! what the members reported to the next view. The coordinator proposes their result through
//! the config store; the store applies it only if the group is still in the old view.

use std::collections::BTreeMap;

use tandem_config::{SinceView, View};
use tandem_replication::{NodeId, Safety};

/// Reports a promotion needs from the old view's backups: n − k + 1, so at least one of the
/// reporters holds every record a reply was released for. A rule that acknowledges before any
/// backup holds the record (1-safe, bounded) promises nothing a report could keep: one
/// report suffices.
pub fn reports_needed(backups: usize, safety: Safety) -> usize {
    let Some(acks) = safety.backup_acks() else {
        return 1.min(backups);
    };
    let k = acks.needed(backups);
    backups - k + 1
}

/// Why no view could be chosen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("{got} of the {needed} reports a promotion needs")]
    TooFewReports { got: usize, needed: usize },
    #[error("node {node} is not a backup of view {view}")]
    NotABackup { node: NodeId, view: u64 },
    #[error("node {node} is already a member of view {view}")]
    AlreadyMember { node: NodeId, view: u64 },
    #[error("node {node} is not a spare of view {view}")]
    NotASpare { node: NodeId, view: u64 },
    #[error(
        "the reporters of view {view} hold records up to LSN {lsn}, short of the truncate \
         LSN {floor} of its last promotion"
    )]
    BehindTruncate { view: u64, lsn: u64, floor: u64 },
    #[error(
        "the primary of view {view} may be the only holder of what it released since its \
         backups were left out: the change waits for its own report"
    )]
    PrimarySoleHolder { view: u64 },
}

/// The members of `view` whose reports a change of its primary counts: its backups, or, in
/// a view without backups, its spares. A view has no backups after a promotion whose other
/// reporters were behind, and under a 2-safe rule nothing new is released in it: a spare
/// that holds the records up to that promotion's truncate LSN holds every acknowledged
/// record, and may take over. Without this a primary that died before a spare caught up and
/// became a backup left the group down for good, though a spare held every record. A
/// removal under a 2-safe rule never takes the last backup; the coordinator's leaving out of
/// backups that all restarted does, and marks the view ([`View::primary_sole_holder`]):
/// its spares report, but none is promoted.
pub fn reporters(view: &View) -> &[NodeId] {
    if view.backups.is_empty() {
        &view.spares
    } else {
        &view.backups
    }
}

/// How many reports a change of `view`'s primary needs before it may go ahead without
/// waiting for the rest.
pub fn reports_needed_in(view: &View, safety: Safety) -> usize {
    if view.backups.is_empty() {
        1
    } else {
        reports_needed(view.backups.len(), safety)
    }
}

/// What a reporter holds: every record up to `lsn_received` of the history of view
/// `view_held` (the old view itself, or one the same primary reigned over, for a backup
/// that stopped accepting its primary; an older view for a member that rewound to follow a
/// primary that never served, and reports the records it held before).
///
/// `restarted`: the reporter lost its memory and reports what it rebuilt from its
/// write-ahead log (synced before it reported). Such a report proves what reached that log,
/// not what the reporter's lost incarnation acknowledged: see [`promote_from`] for when it
/// counts.
///
/// `incarnation`: the reporter's life ([`crate::Cluster::incarnation`]). A promotion names
/// the lives of the members it names from reports of rebuilt records
/// ([`tandem_config::Promotion::rebuilt`]).
///
/// `lsn_synced`: the most the reporter ever told the primary its write-ahead log synced in
/// the role it reports from (a frozen backup tells it nothing more); for a report of rebuilt
/// records, what the log gave back. Under `durable` a release counts synced records, so the
/// bound on what was released comes from it ([`promote_from`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reported {
    pub lsn_received: u64,
    pub view_held: u64,
    pub restarted: bool,
    pub incarnation: u64,
    pub lsn_synced: u64,
}

/// [`promote_from`] with reports from members that all hold the old view's history.
pub fn promote(
    old: &View,
    reports: &BTreeMap<NodeId, u64>,
    safety: Safety,
) -> Result<View, RuleError> {
    let reports: BTreeMap<NodeId, Reported> = reports
        .iter()
        .map(|(&node, &lsn_received)| {
            let view_held = old.number;
            (
                node,
                Reported {
                    lsn_received,
                    view_held,
                    restarted: false,
                    incarnation: 0,
                    lsn_synced: lsn_received,
                },
            )
        })
        .collect();
    promote_from(old, &reports, safety)
}

/// The view that replaces a failed primary. `reports` holds what the members of `old` that
/// stopped accepting its primary hold: its backups, or its spares if it has none
/// ([`reporters`]). The reporter that holds the most of `old`'s history is promoted (then
/// the most records; ties: the lowest node id); its LSN is the new view's truncate LSN,
/// above which every member discards the records that are not the new primary's. The other
/// reporters that hold as much stay backups. If none does, the one closest to it stays a
/// backup all the same, and so does not leave the new primary alone for a second view
/// change (2-safe commits wait in a view without backups); the other reporters become
/// spares, and backups once caught up. Backups that did not report leave the view (they
/// stand by, and rejoin as spares); spares stay spares.
///
/// A backup kept behind the truncate LSN counts for the next change only once it holds it:
/// under a 2-safe rule no reporter that holds less of `old`'s history than the truncate LSN
/// of `old`'s last promotion is promoted (`BehindTruncate`; the change waits for more
/// reports). Promoted before it caught up, it would lose records an earlier view
/// acknowledged (the simulator found this: a backup 1,500 records behind was promoted after
/// the primary that had them paused). A reporter that holds that LSN holds every record
/// released up to `old`'s start, and the n − k + 1 reports include one that holds every
/// record released in `old` since: an ack of a record means every record below it was
/// received. 1-safe and bounded rules may lose what they released, and take the best
/// reporter they have.
///
/// A spare that rewound to follow `old`'s primary, which never served (it restarted
/// without its memory before `old` was committed), reports the records it held before
/// (`view_held` older than `old`): `old`'s history agrees with them up to its truncate LSN,
/// which is all an acknowledgement can have reached, since no backup served in `old`. The
/// promotion then names that view as its base ([`tandem_config::Promotion::based_on`]), so
/// that the new primary keeps its records above `old`'s truncate LSN and the members
/// that followed `old` do not (the simulator found a cluster down for good: the only node
/// holding every acknowledged record had rewound for a primary that never came).
///
/// A report from a node that restarted ([`Reported::restarted`]) holds what its synced log
/// gave back. Under the `durable` rule that is as good as any report: every acknowledged
/// record was synced by the primary and k backups, so n − k + 1 reports of synced logs
/// include one that holds it. Under a rule that acknowledges from memory, what the lost
/// incarnation acknowledged may be missing from its log, so such a report counts only when
/// every reporter of `old` and its primary restarted (the whole group lost power and the logs
/// are all there is); then no reporter need hold the last promotion's released LSN either,
/// since the acknowledgements behind it lived in memory only. It counts too when the life
/// that sends it is the one `old`'s last promotion named from such a report
/// ([`tandem_config::Promotion::rebuilt`]): still reporting rebuilt records, that life has
/// heard no primary, so it acknowledged nothing, and its lost lives died before that
/// promotion. Otherwise restarted reports
/// are ignored, and the change waits for the living. The old primary's own report, which it
/// sends only once it restarted, offers its records as a candidate but counts towards no
/// quorum; on a tie a backup wins, and the old primary, unless promoted, leaves the view.
///
/// When every counted report lies below the last promotion's released LSN, the coordinator
/// asks the spares of `old` too: a spare's report is a candidate like the old primary's (it
/// acknowledged nothing in `old`, so it counts towards no quorum and no released bound), and
/// it is promoted if it holds the most of `old`'s history and at least that LSN. Every
/// record released lies at or below it or is held by a counted reporter, so such a spare
/// holds them all (`--ticks 2000` seed 155723: under `durable` every log had failed, the
/// primary and its only backup were restarted with logs far behind what was released, and
/// only a spare's log still held it; the group waited for good).
///
/// A view whose backups were all left out while its primary ran
/// ([`View::primary_sole_holder`]) has no such bound: what its primary released with them
/// lies above the last promotion's, held by no member but the primary. No spare is promoted
/// out of it (`PrimarySoleHolder`: the change waits); the old primary's own report is, and
/// every record it holds counts as released.
pub fn promote_from(
    old: &View,
    reports: &BTreeMap<NodeId, Reported>,
    safety: Safety,
) -> Result<View, RuleError> {
    let reporters = reporters(old);
    let primary_restarted = check_reporters(old, reports)?;
    // A spare of a view with backups reports only when the backups' reports hold too little
    // (the coordinator asks the spares once `BehindTruncate` held the change up): its
    // records are a candidate like the old primary's, and count towards no quorum.
    let counted = |node: NodeId| reporters.contains(&node);
    let synced_rule = matches!(safety, Safety::Durable(_));
    let backups_reported = reports.keys().filter(|&&node| counted(node)).count();
    let whole_group_restarted = primary_restarted
        && backups_reported == reporters.len()
        && reports
            .iter()
            .filter(|&(&node, _)| counted(node) || node == old.primary)
            .all(|(_, reported)| reported.restarted);
    let all_reports = reports;
    let reports = candidates(old, reports, synced_rule, whole_group_restarted);
    // The old primary's records, and a spare's, are a candidate like a backup's, but their
    // reports are no backup's: they do not count towards the n − k + 1.
    let got = reports.keys().filter(|&&node| counted(node)).count();
    // A view with neither backups nor spares has no one to report but its primary: restarted
    // with the records its log gave back, it takes them into a reign of its own (any-time
    // seed 82: a primary promoted alone crashed at once, came back from its log, and the
    // group waited on it for good). Nothing was released in that view beyond its start under
    // a rule that waits for backups, and its log holds the truncate LSN it started at.
    let needed = if reporters.is_empty() {
        0
    } else {
        reports_needed_in(old, safety)
    };
    if got < needed || reports.is_empty() {
        return Err(RuleError::TooFewReports {
            got,
            needed: needed.max(1),
        });
    }
    // Under a rule that promises nothing at a failover, no release needs a holder.
    let sole_holder = old.primary_sole_holder && safety.backup_acks().is_some();
    // BTreeMap iterates by node id, so on equal holdings the first (lowest id) wins.
    // On equal holdings a backup wins over the old primary: the old primary stays out of the
    // view and rejoins as a spare, which a backup that cannot serve yet may be replaced by
    // (default-mix seeds 585 and 1160: a second power loss struck as the old primary's
    // promotion committed, its backups came back without it, and no spare could take their
    // place).
    let (primary, promoted, held_of_old) =
        candidate(&eligible(old, &reports, sole_holder)?, reporters);
    let floor = if whole_group_restarted && !synced_rule {
        0
    } else {
        released_max_before(old, safety)
    };
    if held_of_old < floor && !promote_lowest() {
        return Err(RuleError::BehindTruncate {
            view: old.number,
            lsn: held_of_old,
            floor,
        });
    }
    let lsn_truncate = promoted.lsn_received;
    let based_on = (old.since(promoted.view_held) != SinceView::Kept).then_some(promoted.view_held);
    // Out of a view whose primary may alone hold what it released, the old primary is
    // promoted, and any of its records may have been released.
    let lsn_released_max = if sole_holder {
        lsn_truncate
    } else {
        released_max(old, &held_by_backups(old, &reports, safety), safety)
            .max(floor)
            .min(lsn_truncate)
    };
    let promotions = old.promotions_with(old.number + 1, lsn_truncate, based_on, lsn_released_max);
    let next = View {
        number: old.number + 1,
        primary,
        backups: Vec::new(),
        spares: Vec::new(),
        promotions,
        primary_sole_holder: false,
    };
    let (backups, spares) = members_after(old, &next, &reports, lsn_truncate);
    let mut next = View {
        backups,
        spares,
        ..next
    };
    next.promotions.last_mut().expect("made above").rebuilt = rebuilt_lives(&next, all_reports);
    Ok(next)
}

/// What each backup of `old` that reported holds of its history as a release counts it:
/// under `durable`, what its log synced (no more than it holds; k-of-n seed 212240: the
/// bound taken from what the backups had received was more than any log held once the whole
/// group lost power, and the group waited for good).
fn held_by_backups(
    old: &View,
    candidates: &BTreeMap<NodeId, (Reported, u64)>,
    safety: Safety,
) -> Vec<u64> {
    let synced_rule = matches!(safety, Safety::Durable(_));
    candidates
        .iter()
        .filter(|&(node, _)| reporters(old).contains(node))
        .map(|(_, &(reported, held))| {
            if synced_rule {
                held.min(reported.lsn_synced)
            } else {
                held
            }
        })
        .collect()
}

/// The candidates that may take the place of `old`'s primary: all of them, unless that
/// primary may be the only holder of what it released (`sole_holder`,
/// [`View::primary_sole_holder`] under a rule that promises): then only its own records,
/// which it reports once it restarted, and the change waits for them (`PrimarySoleHolder`).
/// A spare's report bounds nothing it released with the backups the view left out.
fn eligible(
    old: &View,
    candidates: &BTreeMap<NodeId, (Reported, u64)>,
    sole_holder: bool,
) -> Result<BTreeMap<NodeId, (Reported, u64)>, RuleError> {
    if !sole_holder {
        return Ok(candidates.clone());
    }
    let own: BTreeMap<NodeId, (Reported, u64)> = candidates
        .iter()
        .filter(|&(&node, _)| node == old.primary)
        .map(|(&node, &candidate)| (node, candidate))
        .collect();
    if own.is_empty() {
        return Err(RuleError::PrimarySoleHolder { view: old.number });
    }
    Ok(own)
}

/// The reports that are candidates for the promotion out of `old`, each with how much of
/// `old`'s history it holds: a report of records rebuilt from a log counts only where it can
/// stand for what its lost life acknowledged (under `durable`, a whole group's restart, the
/// old primary, a spare, or a backup named by the last promotion), and a reporter whose
/// records' fate is unknown is left out.
fn candidates(
    old: &View,
    reports: &BTreeMap<NodeId, Reported>,
    synced_rule: bool,
    whole_group_restarted: bool,
) -> BTreeMap<NodeId, (Reported, u64)> {
    let reporters = reporters(old);
    // A backup whose report the last promotion of `old` was made from, and which has heard
    // no primary since (it still reports rebuilt records, from the same life), acknowledged
    // nothing since that promotion, and no earlier life of it served in a view since (each
    // died before this life reported). Every record released since is held by k of the
    // other backups, so its report counts towards the n − k + 1 as the others' would: the
    // reports of the rest include a holder (any-time seed 300810: a backup followed the
    // whole group's recovery from its log while cut off from the primary, which then
    // crashed; the two live backups that held every acknowledged record were 2 of the 3
    // reports one ack of three needs, and the group stayed down for good). What it holds
    // is what it reported then; as a candidate it must hold the last promotion's
    // `lsn_released_max` like any reporter.
    let named_by_last_promotion = |node: NodeId, reported: &Reported| {
        node != old.primary
            && old
                .promotions
                .last()
                .is_some_and(|promotion| promotion.rebuilt.contains(&(node, reported.incarnation)))
    };
    // The old primary's report of rebuilt records is always a candidate (it counts towards
    // no quorum): a record its lost life released was acknowledged by k backups, one of the
    // counted reporters holds it, and the old primary is promoted only if its log holds as
    // much of `old`'s history as every counted reporter (any-time seed 329856: the primary of
    // a view that never served crashed, its log held the two records released in the view
    // before that its only backup lacked, and the group waited for good).
    let counts = |node: NodeId, reported: &Reported| {
        !reported.restarted
            || synced_rule
            || whole_group_restarted
            || node == old.primary
            || !reporters.contains(&node)
            || named_by_last_promotion(node, reported)
    };
    // How much of `old`'s history each reporter holds; a reporter whose records' fate is
    // unknown (more promotions since its view than `old` remembers) holds none of it.
    let of_old = |reported: &Reported| -> Option<u64> {
        assert!(
            reported.view_held <= old.number,
            "a reporter holds no view newer than the one it reports in"
        );
        match old.since(reported.view_held) {
            SinceView::Kept => Some(reported.lsn_received),
            SinceView::TruncatedAt(lsn) => Some(lsn.min(reported.lsn_received)),
            SinceView::Unknown => None,
        }
    };
    reports
        .iter()
        .filter(|&(&node, reported)| counts(node, reported))
        .filter_map(|(&node, reported)| Some((node, (*reported, of_old(reported)?))))
        .collect()
}

/// Checks that every report of `old`'s change of primary comes from one of its backups (or,
/// asked for, a spare), or from its primary restarted with records from its log; returns
/// whether the primary so reported. The old primary reports only once it restarted: that it
/// lost its memory is what tells a whole group's power loss from a failure of the backups
/// alone (the simulator's k-of-n seed 80996: the one backup of a view restarted while the
/// primary ran, its report was taken for the whole group's, and a commit only the removed
/// backup had acknowledged was lost).
fn check_reporters(old: &View, reports: &BTreeMap<NodeId, Reported>) -> Result<bool, RuleError> {
    let reporters = reporters(old);
    let primary_restarted = match reports.get(&old.primary) {
        Some(reported) if reported.restarted => true,
        Some(_) => {
            let (node, view) = (old.primary, old.number);
            return Err(RuleError::NotABackup { node, view });
        }
        None => false,
    };
    for &node in reports.keys().filter(|&&node| node != old.primary) {
        if !reporters.contains(&node) && !old.spares.contains(&node) {
            let view = old.number;
            return Err(if old.backups.is_empty() {
                RuleError::NotASpare { node, view }
            } else {
                RuleError::NotABackup { node, view }
            });
        }
    }
    Ok(primary_restarted)
}

/// The report to promote from: the most of the old view's history held, then the most
/// received, then a counted reporter (a backup) over the old primary or a spare; on equal
/// ranks the lowest node id. Returns the node, its report and what it holds of the old
/// view's history. `reports` is not empty.
fn candidate(
    reports: &BTreeMap<NodeId, (Reported, u64)>,
    reporters: &[NodeId],
) -> (NodeId, Reported, u64) {
    let rank = |node: NodeId, (reported, held): &(Reported, u64)| {
        (*held, reported.lsn_received, reporters.contains(&node))
    };
    let (&primary, &(promoted, held_of_old)) = reports
        .iter()
        .fold(
            None,
            |best: Option<(&NodeId, &(Reported, u64))>, entry| match best {
                Some((&best_node, best_report))
                    if rank(best_node, best_report) >= rank(*entry.0, entry.1)
                        && !promote_lowest() =>
                {
                    best
                }
                Some((&best_node, best_report))
                    if rank(best_node, best_report) <= rank(*entry.0, entry.1)
                        && promote_lowest() =>
                {
                    best
                }
                _ => Some(entry),
            },
        )
        .expect("at least one report");
    (primary, promoted, held_of_old)
}

/// The backups and spares of `next`, the view that promotes `next.primary` from `old` at
/// `lsn_truncate`: the reporters holding every record up to it as a prefix of the new
/// primary's (else the closest behind), the other reporters and `old`'s spares as spares.
/// The old primary, unless promoted, leaves the view like a backup that did not report: it
/// lost its memory, and rejoins as a spare (a backup it would stay could not serve until a
/// view left it out; seed 1160).
fn members_after(
    old: &View,
    next: &View,
    reports: &BTreeMap<NodeId, (Reported, u64)>,
    lsn_truncate: u64,
) -> (Vec<NodeId>, Vec<NodeId>) {
    let primary = next.primary;
    // Whether each other reporter holds a prefix of the new primary's records, and so
    // follows it without rewinding.
    let keeps_all = |reported: &Reported| -> bool {
        match next.since(reported.view_held) {
            SinceView::Kept => true,
            SinceView::TruncatedAt(lsn) => reported.lsn_received <= lsn,
            SinceView::Unknown => false,
        }
    };
    let others = || {
        reports
            .iter()
            .filter(|&(&node, _)| node != primary && node != old.primary)
            .map(|(&node, (reported, _))| (node, *reported))
    };
    let mut backups: Vec<NodeId> = others()
        .filter(|(_, reported)| keeps_all(reported) && reported.lsn_received == lsn_truncate)
        .map(|(node, _)| node)
        .collect();
    if backups.is_empty() {
        // The closest behind (ties: the lowest id).
        let closest = others().fold(
            None,
            |best: Option<(NodeId, u64)>, (node, reported)| match best {
                Some((_, best_lsn)) if best_lsn >= reported.lsn_received => best,
                _ => Some((node, reported.lsn_received)),
            },
        );
        backups.extend(closest.map(|(node, _)| node));
    }
    let mut spares: Vec<NodeId> = others()
        .map(|(node, _)| node)
        .chain(old.spares.iter().copied())
        .filter(|node| *node != primary && !backups.contains(node))
        .collect();
    spares.sort_unstable();
    spares.dedup();
    assert!(
        promote_lowest()
            || others().all(|(_, reported)| {
                keeps_all(&reported) || old.since(reported.view_held) != SinceView::Kept
            })
    );
    (backups, spares)
}

/// The lives of `view`'s members that reported records rebuilt from their log: only those
/// lives may serve in the view from such records (`role::made_from_report`). A later life of
/// the same node may have the same records, and the view's number may be one its lost life
/// served in (a whole group's power loss before any node saved a commit index covering it):
/// that life's acknowledgements are not in its log.
fn rebuilt_lives(view: &View, reports: &BTreeMap<NodeId, Reported>) -> Vec<(NodeId, u64)> {
    view.members()
        .filter_map(|node| {
            let reported = reports.get(&node)?;
            reported.restarted.then_some((node, reported.incarnation))
        })
        .collect()
}

/// The LSN at or below which every record released before `old`'s primary failed lies, as
/// far as `old`'s last promotion showed: what a reporter must hold (0 under a rule that
/// releases before any backup holds a record, or before any promotion).
fn released_max_before(old: &View, safety: Safety) -> u64 {
    match safety.backup_acks() {
        Some(_) => old
            .promotions
            .last()
            .map_or(0, |promotion| promotion.lsn_released_max),
        None => 0,
    }
}

/// The LSN at or below which every released record lies, from how much of `old`'s history
/// each reporter holds (`held`). Every released record is held by at least k of `old`'s n
/// backups (the replication core keeps that true across membership changes: a spare made a
/// backup holds every released record, and a removal keeps the rule among the backups that
/// remain); at most n − r of them did not report, so at least k − (n − r) reporters hold it:
/// it lies at or below the (k − (n − r))-th highest holding. A view without backups releases
/// nothing (2-safe), nor does a 1-safe or bounded rule promise anything: 0.
fn released_max(old: &View, held: &[u64], safety: Safety) -> u64 {
    let Some(acks) = safety.backup_acks() else {
        return 0;
    };
    let backups = old.backups.len();
    if backups == 0 {
        return 0;
    }
    let k = acks.needed(backups);
    let silent = backups.saturating_sub(held.len());
    let holders = k.saturating_sub(silent);
    assert!(
        holders >= 1,
        "a promotion has the n − k + 1 reports it needs"
    );
    let mut held = held.to_vec();
    held.sort_unstable_by(|a, b| b.cmp(a));
    held[holders - 1]
}

/// Whether the promote-lowest bug is planted.
fn promote_lowest() -> bool {
    #[cfg(feature = "inject-bugs")]
    if tandem_replication::bugs::planted(tandem_replication::bugs::Bug::PromoteLowest) {
        return true;
    }
    false
}

/// The view without backup `failed`, which stopped acknowledging: commits that need every
/// backup's ack go on without it. The primary keeps all its records (no truncation). The
/// backups in `behind` lack records a reply was released for: they become spares, backups
/// again once caught up, so that a promotion never counts on them meanwhile. The spares in
/// `joining` hold every released record (the primary says so) and become backups.
pub fn remove_backup(
    old: &View,
    failed: NodeId,
    behind: &[NodeId],
    joining: &[NodeId],
) -> Result<View, RuleError> {
    if !old.backups.contains(&failed) {
        return Err(RuleError::NotABackup {
            node: failed,
            view: old.number,
        });
    }
    if let Some(&node) = joining.iter().find(|node| !old.spares.contains(node)) {
        return Err(RuleError::NotASpare {
            node,
            view: old.number,
        });
    }
    let mut spares: Vec<NodeId> = old
        .backups
        .iter()
        .copied()
        .filter(|node| *node != failed && behind.contains(node))
        .chain(old.spares.iter().copied())
        .filter(|node| !joining.contains(node))
        .collect();
    spares.sort_unstable();
    let backups: Vec<NodeId> = old
        .backups
        .iter()
        .copied()
        .filter(|&n| n != failed && !behind.contains(&n))
        .chain(joining.iter().copied())
        .collect();
    Ok(old.with_members(backups, spares))
}

/// The view with `node` as a spare: it receives the stream but its acks count for no rule
/// until it has caught up ([`promote_spare`]).
pub fn add_spare(old: &View, node: NodeId) -> Result<View, RuleError> {
    if old.primary == node || old.backups.contains(&node) || old.spares.contains(&node) {
        return Err(RuleError::AlreadyMember {
            node,
            view: old.number,
        });
    }
    let mut spares = old.spares.clone();
    spares.push(node);
    spares.sort_unstable();
    Ok(old.with_members(old.backups.clone(), spares))
}

/// The view with spare `node`, which has caught up, as a backup.
pub fn promote_spare(old: &View, node: NodeId) -> Result<View, RuleError> {
    if !old.spares.contains(&node) {
        return Err(RuleError::NotASpare {
            node,
            view: old.number,
        });
    }
    let mut backups = old.backups.clone();
    backups.push(node);
    backups.sort_unstable();
    let spares = old.spares.iter().copied().filter(|&n| n != node).collect();
    Ok(old.with_members(backups, spares))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem_replication::AckCount;

    fn view(primary: NodeId, backups: &[NodeId]) -> View {
        View {
            number: 7,
            primary,
            backups: backups.to_vec(),
            spares: Vec::new(),
            promotions: Vec::new(),
            primary_sole_holder: false,
        }
    }

    #[test]
    fn a_spare_replaces_a_primary_without_backups_only_from_the_truncate_lsn_on() {
        let old = View {
            number: 5,
            primary: 1,
            backups: Vec::new(),
            spares: vec![2, 3, 4],
            promotions: vec![tandem_config::Promotion {
                view: 5,
                truncate_lsn: 100,
                based_on: None,
                lsn_released_max: 100,
                rebuilt: Vec::new(),
            }],
            primary_sole_holder: false,
        };
        let reports = |pairs: &[(NodeId, u64)]| pairs.iter().copied().collect();
        let next = promote(
            &old,
            &reports(&[(2, 100), (3, 100), (4, 90)]),
            Safety::DEFAULT,
        )
        .expect("a spare holds the truncate LSN");
        assert_eq!((next.number, next.primary), (6, 2));
        assert_eq!(next.backups, vec![3], "a spare at the same LSN is a backup");
        assert_eq!(next.spares, vec![4]);
        assert_eq!(next.truncate_lsn(), Some(100));
        assert_eq!(
            promote(&old, &reports(&[(2, 99)]), Safety::DEFAULT),
            Err(RuleError::BehindTruncate {
                view: 5,
                lsn: 99,
                floor: 100
            })
        );
        // 1-safe may lose what it released: any spare will do.
        let lossy = promote(&old, &reports(&[(2, 99)]), Safety::OneSafe).unwrap();
        assert_eq!((lossy.primary, lossy.truncate_lsn()), (2, Some(99)));
        assert_eq!(
            promote(&old, &reports(&[(7, 100)]), Safety::DEFAULT),
            Err(RuleError::NotASpare { node: 7, view: 5 })
        );
    }

    #[test]
    fn no_spare_replaces_a_primary_that_may_alone_hold_what_it_released() {
        // Seed 1301508's view 27: the backup that held what the primary released since its
        // promotion (LSN 379) was left out; a spare holds 380 of what was released up to 382.
        let last_promotion = tandem_config::Promotion {
            view: 21,
            truncate_lsn: 379,
            based_on: None,
            lsn_released_max: 379,
            rebuilt: Vec::new(),
        };
        let old = View {
            number: 27,
            primary: 3,
            backups: Vec::new(),
            spares: vec![2],
            promotions: vec![last_promotion],
            primary_sole_holder: true,
        };
        let live = |lsn: u64, restarted: bool| Reported {
            lsn_received: lsn,
            view_held: 27,
            restarted,
            incarnation: 1,
            lsn_synced: lsn,
        };
        let durable = Safety::Durable(AckCount::All);
        let spare_only: BTreeMap<NodeId, Reported> = [(2, live(380, true))].into();
        assert_eq!(
            promote_from(&old, &spare_only, durable),
            Err(RuleError::PrimarySoleHolder { view: 27 })
        );
        // The old primary's own report, once it restarted, is promoted, and all it holds
        // counts as released: the spare, behind it, is a backup only once caught up.
        let with_primary: BTreeMap<NodeId, Reported> =
            [(2, live(380, true)), (3, live(384, true))].into();
        let next = promote_from(&old, &with_primary, durable).expect("the old primary");
        assert_eq!((next.primary, next.truncate_lsn()), (3, Some(384)));
        assert_eq!(next.promotions.last().unwrap().lsn_released_max, 384);
        assert!(!next.primary_sole_holder);
        // A rule that promises nothing at a failover takes the spare.
        let spare_live: BTreeMap<NodeId, Reported> = [(2, live(380, false))].into();
        let lossy = promote_from(&old, &spare_live, Safety::OneSafe).expect("the spare");
        assert_eq!((lossy.primary, lossy.truncate_lsn()), (2, Some(380)));
        // Without the mark, the spare that holds the last promotion's bound is promoted.
        let unmarked = View {
            primary_sole_holder: false,
            ..old
        };
        let promoted = promote_from(&unmarked, &spare_only, durable).expect("the spare");
        assert_eq!(promoted.primary, 2);
    }

    #[test]
    fn a_membership_change_marks_a_view_it_leaves_without_backups() {
        let old = view(1, &[2]);
        let alone = remove_backup(&old, 2, &[], &[]).unwrap();
        assert!(alone.primary_sole_holder && alone.backups.is_empty());
        let spare = add_spare(&alone, 3).unwrap();
        assert!(
            spare.primary_sole_holder,
            "a spare holds nothing it released"
        );
        let backup = promote_spare(&spare, 3).unwrap();
        assert!(
            !backup.primary_sole_holder,
            "a caught-up backup holds it all"
        );
        // A view that had no backups to leave out is not marked by a spare's coming.
        let promoted = View {
            backups: Vec::new(),
            ..view(1, &[])
        };
        assert!(!add_spare(&promoted, 3).unwrap().primary_sole_holder);
    }

    #[test]
    fn quorum_is_n_minus_k_plus_one() {
        assert_eq!(reports_needed(2, Safety::DEFAULT), 1);
        assert_eq!(reports_needed(3, Safety::TwoSafe(AckCount::Of(1))), 3);
        assert_eq!(reports_needed(3, Safety::TwoSafe(AckCount::Of(2))), 2);
        assert_eq!(
            reports_needed(4, Safety::TwoSafeApplied(AckCount::Of(3))),
            2
        );
        assert_eq!(reports_needed(2, Safety::OneSafe), 1);
        assert_eq!(reports_needed(2, Safety::Bounded(10)), 1);
    }

    #[test]
    fn a_spare_that_holds_what_was_released_is_promoted_when_every_backup_is_behind_it() {
        // View 84 of `--ticks 2000` seed 155723, under durable: every log had failed, the
        // operator restarted the primary (3) and its only backup (4), whose logs gave back
        // far less than the last promotion released (732); a spare's log (1) still held it.
        let old = View {
            number: 84,
            primary: 3,
            backups: vec![4],
            spares: vec![1, 2],
            promotions: vec![tandem_config::Promotion {
                view: 83,
                truncate_lsn: 744,
                based_on: None,
                lsn_released_max: 732,
                rebuilt: Vec::new(),
            }],
            primary_sole_holder: false,
        };
        let rebuilt = |lsn: u64| Reported {
            lsn_received: lsn,
            view_held: 84,
            restarted: true,
            incarnation: 2,
            lsn_synced: lsn,
        };
        let safety = Safety::Durable(AckCount::All);
        let group = BTreeMap::from([(3, rebuilt(722)), (4, rebuilt(338))]);
        assert_eq!(
            promote_from(&old, &group, safety),
            Err(RuleError::BehindTruncate {
                view: 84,
                lsn: 722,
                floor: 732
            })
        );
        // A spare's report is a candidate, never one of the reports a change needs.
        let spare_alone = BTreeMap::from([(1, rebuilt(732))]);
        assert_eq!(
            promote_from(&old, &spare_alone, safety),
            Err(RuleError::TooFewReports { got: 0, needed: 1 })
        );
        let mut with_spare = group.clone();
        with_spare.insert(1, rebuilt(732));
        let next = promote_from(&old, &with_spare, safety).expect("the spare holds the floor");
        assert_eq!((next.number, next.primary), (85, 1));
        assert_eq!(next.truncate_lsn(), Some(732));
        assert_eq!(next.promotions.last().unwrap().lsn_released_max, 732);
        // A spare that holds less than the floor is no help, and one that is not in the
        // view is refused.
        let mut short = group.clone();
        short.insert(1, rebuilt(731));
        assert!(matches!(
            promote_from(&old, &short, safety),
            Err(RuleError::BehindTruncate { .. })
        ));
        let mut stranger = group;
        stranger.insert(5, rebuilt(900));
        assert_eq!(
            promote_from(&old, &stranger, safety),
            Err(RuleError::NotABackup { node: 5, view: 84 })
        );
        // On equal holdings a backup wins over a spare.
        let tie = BTreeMap::from([(1, rebuilt(740)), (4, rebuilt(740))]);
        assert_eq!(promote_from(&old, &tie, safety).unwrap().primary, 4);
    }

    #[test]
    fn the_highest_lsn_is_promoted_and_becomes_the_truncate_lsn() {
        let old = view(1, &[2, 3, 4]);
        let reports = BTreeMap::from([(2, 90), (3, 100), (4, 95)]);
        let new = promote(&old, &reports, Safety::DEFAULT).unwrap();
        assert_eq!(new.number, 8);
        assert_eq!(new.primary, 3);
        assert_eq!(new.truncate_lsn(), Some(100));
        // Behind the truncate LSN: the closest stays a backup rather than leave the primary
        // alone; the other is a spare until it catches up.
        assert_eq!(new.backups, vec![4]);
        assert_eq!(new.spares, vec![2]);
        // Every backup acked each released record, so none lies above the lowest report,
        // 90: that backup may take over holding 99 (any-time seed 58033: the promoted node
        // died at once, and refusing the backup one record short of the truncate LSN left
        // the group down for good), but not holding less than 90.
        assert_eq!(new.promotions[0].lsn_released_max, 90);
        let next = promote(&new, &BTreeMap::from([(4, 99)]), Safety::DEFAULT).unwrap();
        assert_eq!((next.primary, next.truncate_lsn()), (4, Some(99)));
        assert_eq!(
            promote(&new, &BTreeMap::from([(4, 89)]), Safety::DEFAULT),
            Err(RuleError::BehindTruncate {
                view: 8,
                lsn: 89,
                floor: 90
            })
        );
        // With one ack of three, a record only the promoted node held may have been
        // released: the backup counts only once it holds the truncate LSN.
        let one_of_three = Safety::TwoSafe(AckCount::Of(1));
        let new = promote(&old, &reports, one_of_three).unwrap();
        assert_eq!(new.promotions[0].lsn_released_max, 100);
        assert_eq!(
            promote(&new, &BTreeMap::from([(4, 99)]), one_of_three),
            Err(RuleError::BehindTruncate {
                view: 8,
                lsn: 99,
                floor: 100
            })
        );
        let caught_up = promote(&new, &BTreeMap::from([(4, 104)]), Safety::DEFAULT).unwrap();
        assert_eq!(
            (caught_up.primary, caught_up.truncate_lsn()),
            (4, Some(104))
        );
        let level = BTreeMap::from([(2, 100), (3, 100), (4, 95)]);
        let new = promote(&old, &level, Safety::DEFAULT).unwrap();
        assert_eq!(new.primary, 2);
        assert_eq!(new.backups, vec![3]);
        assert_eq!(new.spares, vec![4]);
    }

    /// Any-time seed 300810: the whole group lost power, view 5 promoted node 1 from its log
    /// and named node 3 a backup from its log's records (2734, below the truncate LSN);
    /// node 3, cut off from node 1, never heard a primary, while views 6 and 7 made nodes 2
    /// and 4 backups again. With one ack of three backups, node 1 crashed: nodes 2 and 4
    /// hold every record acknowledged since view 5 (node 3 acknowledged none), and node 3's
    /// report, from the life view 5 named, counts as the third of the three needed.
    #[test]
    fn a_backup_named_from_its_log_that_heard_no_primary_counts_as_a_reporter() {
        let old = View {
            number: 7,
            primary: 1,
            backups: vec![2, 3, 4],
            spares: Vec::new(),
            promotions: vec![tandem_config::Promotion {
                view: 5,
                truncate_lsn: 2737,
                based_on: None,
                lsn_released_max: 2734,
                rebuilt: vec![(1, 11), (2, 21), (3, 31), (4, 41)],
            }],
            primary_sole_holder: false,
        };
        let live = |lsn_received, incarnation| Reported {
            lsn_received,
            view_held: 7,
            restarted: false,
            incarnation,
            lsn_synced: lsn_received,
        };
        let rebuilt = |lsn_received, incarnation| Reported {
            restarted: true,
            ..live(lsn_received, incarnation)
        };
        let one_of_three = Safety::TwoSafe(AckCount::Of(1));
        let reports = BTreeMap::from([
            (1, rebuilt(2745, 12)),
            (2, live(2746, 21)),
            (3, rebuilt(2734, 31)),
            (4, live(2746, 41)),
        ]);
        let new = promote_from(&old, &reports, one_of_three).unwrap();
        assert_eq!((new.number, new.primary), (8, 2));
        assert_eq!(new.truncate_lsn(), Some(2746));
        assert_eq!(new.backups, vec![4]);
        // The old primary lost its memory: it leaves the view, to rejoin as a spare.
        assert_eq!(new.spares, vec![3]);
        assert_eq!(new.promotions.last().unwrap().rebuilt, vec![(3, 31)]);
        // Another life of node 3 may have acknowledged what its log lacks: not counted.
        let mut later_life = reports.clone();
        later_life.insert(3, rebuilt(2734, 32));
        assert_eq!(
            promote_from(&old, &later_life, one_of_three),
            Err(RuleError::TooFewReports { got: 2, needed: 3 })
        );
        // Nor is the old primary's, from the life the promotion named.
        let mut primary_named = reports.clone();
        primary_named.insert(1, rebuilt(2745, 11));
        primary_named.remove(&2);
        assert_eq!(
            promote_from(&old, &primary_named, one_of_three),
            Err(RuleError::TooFewReports { got: 2, needed: 3 })
        );
    }

    /// K-of-n seed 212240: view 1 (primary 1, backups 2, 3 and 4, `durable:2`) was replaced
    /// by a promotion from the backups' memory (each had received 262, and synced 257, 258
    /// and 259), and the whole group lost power before the new primary released anything.
    /// What was released in view 1 was synced by two backups at least: at most 258. The
    /// logs gave back 257, 258 and 259, so the next promotion can hold it; bounded by what
    /// the backups had received (262), no log held enough, and the group waited for good.
    #[test]
    fn under_durable_the_bound_on_what_was_released_counts_what_logs_synced() {
        let view_1 = View {
            number: 1,
            primary: 1,
            backups: vec![2, 3, 4],
            spares: Vec::new(),
            promotions: Vec::new(),
            primary_sole_holder: false,
        };
        let durable_2 = Safety::Durable(AckCount::Of(2));
        let frozen = |lsn_synced| Reported {
            lsn_received: 262,
            view_held: 1,
            restarted: false,
            incarnation: 1,
            lsn_synced,
        };
        let reports = BTreeMap::from([(2, frozen(257)), (3, frozen(258)), (4, frozen(259))]);
        let view_2 = promote_from(&view_1, &reports, durable_2).unwrap();
        assert_eq!((view_2.primary, view_2.truncate_lsn()), (2, Some(262)));
        assert_eq!(view_2.promotions.last().unwrap().lsn_released_max, 258);
        // Under a rule that acknowledges from memory, what was received bounds it.
        let two_safe = promote_from(&view_1, &reports, Safety::TwoSafe(AckCount::Of(2)));
        assert_eq!(
            two_safe
                .unwrap()
                .promotions
                .last()
                .unwrap()
                .lsn_released_max,
            262
        );
        // Every node lost power; each reports what its log gave back.
        let rebuilt = |lsn: u64| Reported {
            lsn_received: lsn,
            view_held: 1,
            restarted: true,
            incarnation: 2,
            lsn_synced: lsn,
        };
        let reports = BTreeMap::from([(2, rebuilt(257)), (3, rebuilt(258)), (4, rebuilt(259))]);
        let view_3 = promote_from(&view_2, &reports, durable_2).unwrap();
        assert_eq!((view_3.primary, view_3.truncate_lsn()), (4, Some(259)));
    }

    #[test]
    fn ties_go_to_the_lowest_node_id() {
        let old = view(1, &[2, 3]);
        let reports = BTreeMap::from([(3, 50), (2, 50)]);
        assert_eq!(promote(&old, &reports, Safety::DEFAULT).unwrap().primary, 2);
    }

    #[test]
    fn too_few_reports_or_strangers_are_refused() {
        let old = view(1, &[2, 3, 4]);
        let one = BTreeMap::from([(2, 9)]);
        let k1 = Safety::TwoSafe(AckCount::Of(1));
        assert_eq!(
            promote(&old, &one, k1),
            Err(RuleError::TooFewReports { got: 1, needed: 3 })
        );
        let stranger = BTreeMap::from([(9, 9)]);
        assert!(matches!(
            promote(&old, &stranger, Safety::DEFAULT),
            Err(RuleError::NotABackup { node: 9, .. })
        ));
        assert!(promote(&old, &BTreeMap::new(), Safety::OneSafe).is_err());
    }

    /// The rule's reason to exist: with k of n acks, any n − k + 1 reporters include one that
    /// holds every acknowledged record, so the promoted node has them all.
    #[test]
    fn every_acknowledged_record_survives_any_quorum_of_reports() {
        let backups: Vec<NodeId> = vec![2, 3, 4, 5];
        let n = backups.len();
        for k in 1..=n {
            let safety = Safety::TwoSafe(AckCount::Of(k as u32));
            let needed = reports_needed(n, safety);
            // Received LSNs in every order; an LSN is acknowledged once k backups hold it.
            for rotation in 0..n {
                let lsns: Vec<u64> = (0..n)
                    .map(|i| 10 * (((i + rotation) % n) as u64 + 1))
                    .collect();
                let mut sorted = lsns.clone();
                sorted.sort_unstable_by(|a, b| b.cmp(a));
                let acknowledged = sorted[k - 1];
                for mask in 0u32..(1 << n) {
                    if mask.count_ones() as usize != needed {
                        continue;
                    }
                    let reports: BTreeMap<NodeId, u64> = (0..n)
                        .filter(|i| mask & (1 << i) != 0)
                        .map(|i| (backups[i], lsns[i]))
                        .collect();
                    let new = promote(&view(1, &backups), &reports, safety).unwrap();
                    assert!(
                        new.truncate_lsn().unwrap() >= acknowledged,
                        "k={k} reports={reports:?} lost acknowledged LSN {acknowledged}"
                    );
                }
            }
        }
    }

    #[test]
    fn membership_changes() {
        let old = view(1, &[2, 3]);
        let removed = remove_backup(&old, 3, &[], &[]).unwrap();
        assert_eq!((removed.primary, removed.backups.clone()), (1, vec![2]));
        assert_eq!(removed.truncate_lsn(), None);
        assert!(remove_backup(&old, 1, &[], &[]).is_err());
        let spare = add_spare(&removed, 3).unwrap();
        assert_eq!(spare.spares, vec![3]);
        assert!(add_spare(&spare, 3).is_err());
        assert!(add_spare(&spare, 1).is_err());
        let back = promote_spare(&spare, 3).unwrap();
        assert_eq!(
            (back.backups.clone(), back.spares.clone()),
            (vec![2, 3], vec![])
        );
        assert_eq!(back.number, 10);
        assert!(promote_spare(&back, 3).is_err());
    }
}
