//! Config store members driven over the deterministic network of `common`.

use crate::common;

use common::{ELECTION_TICKS, Faults, Net, change_view, view};
use tandem_config::{
    Applied, ProposeError, RaftRole, Rejection, SNAPSHOT_INTERVAL_ENTRIES, ViewError,
};

const ELECTION: u64 = ELECTION_TICKS as u64;

#[test]
fn one_node_elects_itself_and_commits_alone() {
    let mut net = Net::new(1, 1, 1);
    let ticks = net.run_until(4 * ELECTION, |net| net.leader() == Some(1));
    // The first countdown ends between election_ticks and 2 × election_ticks.
    assert!(
        (ELECTION..2 * ELECTION).contains(&ticks),
        "elected after {ticks} ticks"
    );
    let applied = net.commit(change_view(1, 0, view(1, 1, &[])));
    assert_eq!(applied.outcome, Ok(()));
    assert_eq!(net.core(1).map().groups[&1], view(1, 1, &[]));
}

#[test]
fn three_nodes_elect_one_leader_commit_and_agree() {
    let mut net = Net::new(3, 3, 2);
    let leader = net.elect();
    assert!(net.tick < 3 * ELECTION, "elected at tick {}", net.tick);
    for id in net.live() {
        let expected = if id == leader {
            RaftRole::Leader
        } else {
            RaftRole::Follower
        };
        assert_eq!(net.core(id).role(), expected);
    }
    let applied = net.commit(change_view(1, 0, view(1, 1, &[2, 3])));
    assert_eq!(applied.outcome, Ok(()));
    net.assert_agree();
    assert_eq!(net.core(3).map().groups[&1], view(1, 1, &[2, 3]));
    for id in net.live() {
        let node = &net.nodes[&id];
        assert_eq!(node.applied.len(), 1, "node {id} reports the command once");
        assert_eq!(node.applied[0], applied);
    }
}

#[test]
fn a_follower_refuses_proposals_and_names_the_leader() {
    let mut net = Net::new(3, 3, 3);
    let leader = net.elect();
    let follower = net.live().into_iter().find(|&id| id != leader).unwrap();
    match net
        .core_mut(follower)
        .propose(change_view(1, 0, view(1, 1, &[])))
    {
        Err(ProposeError::NotLeader { leader: named }) => assert_eq!(named, Some(leader)),
        other => panic!("expected NotLeader, got {other:?}"),
    }
}

#[test]
fn racing_and_invalid_view_changes_are_rejected_identically_everywhere() {
    let mut net = Net::new(3, 3, 4);
    let leader = net.elect();
    // Two coordinators built a view 1 from view 0; both reach the log.
    let first = net
        .core_mut(leader)
        .propose(change_view(1, 0, view(1, 1, &[2])))
        .unwrap();
    let second = net
        .core_mut(leader)
        .propose(change_view(1, 0, view(1, 2, &[3])))
        .unwrap();
    // A view naming a node the cluster does not know, and one skipping a number.
    let unknown = net
        .core_mut(leader)
        .propose(change_view(1, 1, view(2, 9, &[2])))
        .unwrap();
    let skip = net
        .core_mut(leader)
        .propose(change_view(1, 1, view(3, 2, &[1])))
        .unwrap();
    net.ready(leader);
    net.run_until(10 * ELECTION, |net| {
        net.live()
            .iter()
            .all(|&id| net.core(id).applied_index() >= skip.index)
    });
    net.assert_agree();

    let expected = [
        (first.index, Ok(())),
        (
            second.index,
            Err(Rejection::StaleFromView {
                group: 1,
                current: 1,
                from_view: 0,
            }),
        ),
        (
            unknown.index,
            Err(Rejection::InvalidView {
                group: 1,
                error: ViewError::UnknownNode { node: 9 },
            }),
        ),
        (
            skip.index,
            Err(Rejection::NotNextNumber {
                group: 1,
                number: 3,
                from_view: 1,
            }),
        ),
    ];
    for id in net.live() {
        let outcomes: Vec<_> = net.nodes[&id]
            .applied
            .iter()
            .map(|applied| (applied.index, applied.outcome.clone()))
            .collect();
        assert_eq!(outcomes, expected, "node {id}");
        assert_eq!(
            net.core(id).map().groups[&1],
            view(1, 1, &[2]),
            "the first proposal won"
        );
    }
}

#[test]
fn leader_crash_new_leader_commits_and_the_old_leader_catches_up() {
    let mut net = Net::new(3, 3, 5);
    let old = net.elect();
    net.commit(change_view(1, 0, view(1, 1, &[2, 3])));
    let term_old = net.core(old).term();

    net.crash(old);
    let new = net.elect();
    assert_ne!(new, old);
    assert!(net.core(new).term() > term_old);
    let applied = net.commit(change_view(1, 1, view(2, 2, &[3])));
    assert_eq!(applied.outcome, Ok(()));

    net.restart(old);
    // The restarted node rebuilt its map from its disk before hearing anyone: the map at its
    // last save, which may lag what it applied (the commit index alone is never saved), and
    // never holds a view it did not commit.
    let rebuilt = net.core(old).map().groups.get(&1).cloned();
    assert!(
        rebuilt.is_none() || rebuilt == Some(view(1, 1, &[2, 3])),
        "{rebuilt:?}"
    );
    assert_eq!(net.core(old).role(), RaftRole::Follower);
    net.run_until(10 * ELECTION, |net| {
        net.core(old).applied_index() == net.core(new).applied_index()
    });
    net.assert_agree();
    // Pre-vote: the returning node did not disturb the leader.
    assert_eq!(net.stable_leader(), Some(new));
}

#[test]
fn a_restarted_follower_catches_up_through_a_snapshot_after_compaction() {
    let mut net = Net::new(3, 3, 6);
    let leader = net.elect();
    let behind = net.live().into_iter().find(|&id| id != leader).unwrap();
    net.crash(behind);
    let changes = 2 * SNAPSHOT_INTERVAL_ENTRIES + 10;
    for number in 1..=changes {
        let primary = if number % 2 == 0 {
            leader
        } else {
            6 - leader - behind
        };
        let applied = net.commit(change_view(1, number - 1, view(number, primary, &[behind])));
        assert_eq!(applied.outcome, Ok(()), "change {number}");
    }
    // The survivors compacted: their saved state holds a snapshot and a short log.
    for id in net.live() {
        let saved = net.nodes[&id].disk.load().unwrap().unwrap();
        assert!(
            saved.snapshot_index >= 2 * SNAPSHOT_INTERVAL_ENTRIES,
            "node {id}"
        );
        assert!(
            saved.entries.len() as u64 <= SNAPSHOT_INTERVAL_ENTRIES + 2,
            "node {id}"
        );
        let mut replay = net.initial.clone();
        for applied in net.history().range(..=saved.snapshot_index).map(|(_, a)| a) {
            let _ = replay.apply(applied.command.as_ref().unwrap());
        }
        assert_eq!(
            saved.snapshot_map, replay,
            "node {id}: the snapshot is the map at its index"
        );
    }

    net.restart(behind);
    let snapshots_before = net.snapshot_messages;
    net.run_until(10 * ELECTION, |net| {
        net.core(behind).applied_index() == net.core(leader).applied_index()
    });
    assert!(
        net.snapshot_messages > snapshots_before,
        "the leader sent a snapshot"
    );
    let installed = &net.nodes[&behind].snapshots_installed;
    assert_eq!(installed.len(), 1, "installed {installed:?}");
    assert!(installed[0] >= 2 * SNAPSHOT_INTERVAL_ENTRIES);
    net.assert_agree();
    assert_eq!(net.core(behind).map().groups[&1].number, changes);

    // It keeps up by appends afterwards, and a restart from its own disk (a snapshot it
    // installed) rebuilds the same map.
    let applied = net.commit(change_view(
        1,
        changes,
        view(changes + 1, behind, &[leader]),
    ));
    assert_eq!(applied.outcome, Ok(()));
    net.crash(behind);
    net.restart(behind);
    // Its disk holds the map at its last save or older; the leader brings it up to date.
    assert!(net.core(behind).map().groups[&1].number >= changes - SNAPSHOT_INTERVAL_ENTRIES);
    net.run_until(10 * ELECTION, |net| {
        net.core(behind).applied_index() == net.core(leader).applied_index()
    });
    assert_eq!(net.core(behind).map(), net.core(leader).map());
}

#[test]
fn a_follower_that_saw_the_leader_die_is_elected_without_waiting_out_the_timeout() {
    let mut net = Net::new(3, 3, 5);
    let old = net.elect();
    net.commit(change_view(1, 0, view(1, 1, &[2, 3])));
    net.crash(old);
    let campaigner = net.live()[0];
    net.core_mut(campaigner).campaign_now();
    net.ready(campaigner);
    // The other follower heard the dead leader within its election timeout: only a campaign
    // that needs no pre-vote and overrides that lease wins before the timeout.
    let ticks = net.run_until(ELECTION, |net| net.stable_leader() == Some(campaigner));
    assert!(ticks < ELECTION, "elected after {ticks} ticks");
    let applied = net.commit(change_view(1, 1, view(2, 2, &[3])));
    assert_eq!(applied.outcome, Ok(()));
    net.assert_agree();

    // A leader's own call does nothing.
    let term = net.core(campaigner).term();
    net.core_mut(campaigner).campaign_now();
    assert!(net.core(campaigner).is_leader());
    assert_eq!(net.core(campaigner).term(), term);
}

#[test]
fn leadership_transfers_on_request() {
    let mut net = Net::new(3, 3, 7);
    let leader = net.elect();
    let target = net.live().into_iter().find(|&id| id != leader).unwrap();
    net.commit(change_view(1, 0, view(1, leader, &[target])));
    net.core_mut(leader).transfer_leader(target);
    net.ready(leader);
    net.run_until(2 * ELECTION, |net| net.stable_leader() == Some(target));
    let applied = net.commit(change_view(1, 1, view(2, target, &[leader])));
    assert_eq!(applied.outcome, Ok(()));
    net.assert_agree();

    // Asked on a follower, the request travels to the leader.
    let follower = net.live().into_iter().find(|&id| id != target).unwrap();
    net.core_mut(follower).transfer_leader(follower);
    net.ready(follower);
    net.run_until(2 * ELECTION, |net| net.stable_leader() == Some(follower));
}

#[test]
fn an_isolated_leader_steps_down_and_a_returning_follower_does_not_disturb() {
    let mut net = Net::new(3, 3, 8);
    let leader = net.elect();
    // Check-quorum: cut off, the leader gives up within an election timeout (or two).
    net.isolated.insert(leader);
    net.run_until(3 * ELECTION, |net| !net.core(leader).is_leader());
    net.isolated.clear();
    let leader = net.elect();
    net.commit(change_view(1, 0, view(1, leader, &[])));

    // Pre-vote: a follower cut off for many timeouts does not raise its term, so when it
    // returns the leader keeps leading in the same term.
    let follower = net.live().into_iter().find(|&id| id != leader).unwrap();
    let term = net.core(leader).term();
    net.isolated.insert(follower);
    net.run(20 * ELECTION);
    assert_eq!(net.core(follower).term(), term, "pre-vote keeps the term");
    assert_ne!(net.core(follower).role(), RaftRole::Leader);
    net.isolated.clear();
    net.run(4 * ELECTION);
    assert_eq!(net.stable_leader(), Some(leader));
    assert_eq!(net.core(leader).term(), term);
    net.assert_agree();
}

#[test]
fn five_voters_survive_two_crashes() {
    let mut net = Net::new(5, 5, 9);
    let leader = net.elect();
    net.commit(change_view(1, 0, view(1, 1, &[2, 3])));
    let others: Vec<_> = net.live().into_iter().filter(|&id| id != leader).collect();
    net.crash(leader);
    net.crash(others[0]);
    let applied = net.commit(change_view(1, 1, view(2, 2, &[3])));
    assert_eq!(applied.outcome, Ok(()));
    net.restart(leader);
    net.restart(others[0]);
    net.run(6 * ELECTION);
    net.assert_agree();
}

#[test]
fn learners_follow_but_neither_vote_nor_lead() {
    // Five nodes, the default three voters: nodes 4 and 5 follow as learners.
    let mut net = Net::new(5, 3, 10);
    let leader = net.elect();
    assert!(leader <= 3);
    let applied = net.commit(change_view(1, 0, view(1, 4, &[5, 1])));
    assert_eq!(applied.outcome, Ok(()));
    net.assert_agree();
    assert_eq!(net.core(5).map().groups[&1].primary, 4);

    // With two voters down, the three live nodes are no quorum: learners do not count.
    let voters_down: Vec<_> = (1..=3).filter(|&id| id != leader).collect();
    for &id in &voters_down {
        net.crash(id);
    }
    net.run(4 * ELECTION);
    assert!(
        !net.core(leader).is_leader(),
        "check-quorum: no quorum without voters"
    );
    net.run(20 * ELECTION);
    assert_eq!(net.leader(), None, "a learner never campaigns");
    for id in voters_down {
        net.restart(id);
    }
    let applied = net.commit(change_view(1, 1, view(2, 5, &[4])));
    assert_eq!(applied.outcome, Ok(()));
    net.assert_agree();
}

/// A safety phase with lost, duplicated, delayed and reordered messages and crashes, then a
/// liveness phase on a healed network. The checker in `common` compares every applied entry
/// across nodes; at the end every node holds the same map, equal to replaying the history.
fn chaos(seed: u64, nodes: u32, voters: u32) -> Net {
    let mut net = Net::new(nodes, voters, seed);
    net.faults = Faults {
        drop_percent: 15,
        duplicate_percent: 10,
        delay_ticks_max: 3,
    };
    for _round in 0..150 {
        let ticks = net.rng.below(ELECTION);
        net.run(ticks);
        // Whoever believes it leads proposes the next view of its own map: racing leaders
        // and stale maps produce rejections, which must be the same everywhere.
        for id in net.live() {
            if net.core(id).is_leader() {
                let from_view = net.core(id).map().view_number(1);
                let primary = 1 + net.rng.below(u64::from(nodes)) as u32;
                let backups: Vec<_> = (1..=nodes).filter(|&n| n != primary).take(2).collect();
                let command = change_view(1, from_view, view(from_view + 1, primary, &backups));
                let _ = net.core_mut(id).propose(command);
                net.ready(id);
            }
        }
        if net.rng.percent(10) {
            let live = net.live();
            if live.len() as u32 == nodes {
                let victim = live[net.rng.below(live.len() as u64) as usize];
                net.crash(victim);
            }
        }
        if net.rng.percent(20) {
            let down: Vec<_> = net
                .nodes
                .iter()
                .filter(|(_, n)| n.core.is_none())
                .map(|(&id, _)| id)
                .collect();
            for id in down {
                net.restart(id);
            }
        }
    }
    // Liveness: heal everything; a leader emerges and every node converges.
    net.faults = Faults::default();
    let down: Vec<_> = net
        .nodes
        .iter()
        .filter(|(_, n)| n.core.is_none())
        .map(|(&id, _)| id)
        .collect();
    for id in down {
        net.restart(id);
    }
    let applied = net.commit(change_view(2, 0, view(1, 1, &[])));
    assert_eq!(applied.outcome, Ok(()), "seed {seed}");
    net.run(2 * ELECTION);
    net.assert_agree();

    // The map is what replaying the agreed history from the initial map gives.
    let mut replay = net.initial.clone();
    for applied in net.history().values() {
        if let Some(command) = &applied.command {
            assert_eq!(
                replay.apply(command),
                applied.outcome,
                "seed {seed} index {}",
                applied.index
            );
        }
    }
    assert_eq!(&replay, net.core(1).map(), "seed {seed}");
    let rejected = net
        .history()
        .values()
        .filter(|a| a.outcome.is_err())
        .count();
    let snapshots: usize = net
        .nodes
        .values()
        .map(|n| n.snapshots_installed.len())
        .sum();
    eprintln!(
        "seed {seed}: {} entries applied, {rejected} rejected, {snapshots} snapshots installed, \
         {} messages, final term {}",
        net.history().len(),
        net.trace.len(),
        net.core(1).term()
    );
    net
}

#[test]
fn lost_duplicated_and_reordered_messages_keep_agreement() {
    for seed in 0..12 {
        let net = chaos(seed, 3, 3);
        let accepted = net.history().values().filter(|a| a.outcome.is_ok()).count();
        assert!(
            accepted >= 2,
            "seed {seed}: only {accepted} commands took effect"
        );
    }
    for seed in 100..104 {
        chaos(seed, 5, 3);
        chaos(seed, 5, 5);
    }
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let first = chaos(42, 3, 3);
    let second = chaos(42, 3, 3);
    assert!(first.trace.len() > 500, "{} messages", first.trace.len());
    assert_eq!(
        first.trace, second.trace,
        "a run depends on nothing but its seed"
    );
    let other = chaos(43, 3, 3);
    assert_ne!(first.trace, other.trace);
}

#[test]
fn election_timeouts_are_jittered_per_node_and_per_seed() {
    // Different seeds elect after different delays, and not always the same node: the
    // jitter comes from the seed, not from raft-rs's thread RNG nor from the node id alone.
    let mut firsts = std::collections::BTreeSet::new();
    let mut delays = std::collections::BTreeSet::new();
    for seed in 0..20 {
        let mut net = Net::new(3, 3, seed);
        let ticks = net.run_until(6 * ELECTION, |net| net.leader().is_some());
        delays.insert(ticks);
        firsts.insert(net.leader().unwrap());
    }
    assert_eq!(firsts.len(), 3, "every node wins some seed: {firsts:?}");
    assert!(delays.len() >= 4, "election delays {delays:?}");
    assert!(
        delays
            .iter()
            .all(|&d| (ELECTION..3 * ELECTION).contains(&d)),
        "{delays:?}"
    );
}

#[test]
fn applied_reports_carry_index_and_term_of_the_proposal() {
    let mut net = Net::new(3, 3, 11);
    let leader = net.elect();
    let proposal = net
        .core_mut(leader)
        .propose(change_view(3, 0, view(1, 2, &[])))
        .unwrap();
    net.ready(leader);
    net.run(ELECTION);
    let applied: &Applied = &net.history()[&proposal.index];
    assert_eq!(
        (applied.index, applied.term),
        (proposal.index, proposal.term)
    );
    assert_eq!(applied.command, Some(change_view(3, 0, view(1, 2, &[]))));
}
