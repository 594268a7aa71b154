//! Where a cluster's groups start: which node leads each group and which nodes back it up
//! (docs/many-groups.md, decision 5). Primaries are spread evenly over the nodes and a
//! group's backups are the nodes after its primary round the ring, so no backup is ever on
//! its primary's node and each node backs up as many groups as it can.

use std::collections::BTreeMap;

use crate::map::{GroupId, NodeId, View};

/// Why groups cannot be placed as asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlacementError {
    #[error("no nodes to place groups on")]
    NoNodes,
    #[error("no groups to place")]
    NoGroups,
    #[error("a group of {members} members needs as many nodes; the cluster has {nodes}")]
    TooFewNodes { members: usize, nodes: usize },
    #[error("a group needs 1 member at least (its primary), not 0")]
    NoMembers,
}

/// The first view of each of `groups` over `nodes`, each group of `members` nodes: the i-th
/// group (in the order given) is led by the i-th node round the ring (`nodes[i mod n]`), and
/// its backups are the `members − 1` nodes after that one round the ring. Every node leads
/// ⌊G/n⌋ or ⌈G/n⌉ groups, and backs up each group it does not lead when `members` is `n`.
pub fn place_groups(
    nodes: &[NodeId],
    groups: &[GroupId],
    members: usize,
) -> Result<BTreeMap<GroupId, View>, PlacementError> {
    if nodes.is_empty() {
        return Err(PlacementError::NoNodes);
    }
    if groups.is_empty() {
        return Err(PlacementError::NoGroups);
    }
    if members == 0 {
        return Err(PlacementError::NoMembers);
    }
    if members > nodes.len() {
        return Err(PlacementError::TooFewNodes {
            members,
            nodes: nodes.len(),
        });
    }
    let n = nodes.len();
    let views = groups.iter().enumerate().map(|(index, &group)| {
        let primary = nodes[index % n];
        let backups = (1..members).map(|step| nodes[(index + step) % n]).collect();
        let view = View {
            number: 1,
            primary,
            backups,
            spares: Vec::new(),
            promotions: Vec::new(),
            primary_sole_holder: false,
        };
        (group, view)
    });
    Ok(views.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primaries_spread_evenly_and_no_backup_shares_its_primarys_node() {
        for nodes in 1..=7u32 {
            let ids: Vec<NodeId> = (1..=nodes).collect();
            for groups in 1..=20u32 {
                let group_ids: Vec<GroupId> = (1..=groups).collect();
                for members in 1..=nodes as usize {
                    let views = place_groups(&ids, &group_ids, members).expect("placeable");
                    assert_eq!(views.len(), groups as usize);
                    let mut led = BTreeMap::<NodeId, u32>::new();
                    for view in views.values() {
                        *led.entry(view.primary).or_default() += 1;
                        assert_eq!(view.backups.len(), members - 1);
                        assert!(!view.backups.contains(&view.primary));
                        let mut distinct = view.backups.clone();
                        distinct.sort_unstable();
                        distinct.dedup();
                        assert_eq!(distinct.len(), members - 1, "{view:?}");
                    }
                    let most = led.values().max().copied().unwrap_or(0);
                    let least = ids.iter().map(|id| led.get(id).copied().unwrap_or(0)).min();
                    assert!(
                        most - least.unwrap_or(0) <= 1,
                        "{nodes} nodes, {groups} groups"
                    );
                }
            }
        }
    }

    #[test]
    fn three_groups_over_three_nodes_each_lead_one_and_back_up_the_others() {
        let views = place_groups(&[1, 2, 3], &[10, 11, 12], 3).expect("placeable");
        let shape: Vec<(GroupId, NodeId, Vec<NodeId>)> = (views.iter())
            .map(|(&group, view)| (group, view.primary, view.backups.clone()))
            .collect();
        assert_eq!(
            shape,
            [
                (10, 1, vec![2, 3]),
                (11, 2, vec![3, 1]),
                (12, 3, vec![1, 2])
            ]
        );
    }

    #[test]
    fn an_impossible_placement_says_why() {
        assert_eq!(place_groups(&[], &[1], 1), Err(PlacementError::NoNodes));
        assert_eq!(place_groups(&[1], &[], 1), Err(PlacementError::NoGroups));
        assert_eq!(place_groups(&[1], &[1], 0), Err(PlacementError::NoMembers));
        assert_eq!(
            place_groups(&[1, 2], &[1], 3),
            Err(PlacementError::TooFewNodes {
                members: 3,
                nodes: 2
            })
        );
    }
}
