//! The cluster map and the commands that change it.
//!
//! [`ClusterMap::apply`] is the replicated state machine: every replica applies the same
//! committed commands in the same order, so the decision (applied or rejected, and why) must
//! depend on nothing but the map and the command. It checks everything before it changes
//! anything, so a rejected command leaves no trace.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::slots::{SLOT_COUNT, SlotError, SlotTable};

/// A node of the cluster. Raft cannot use 0 as a member id, so a config store voter is never 0.
pub type NodeId = u32;

/// A replication group (DESIGN.md, "group").
pub type GroupId = u32;

/// A group's view (DESIGN.md, "view"): who is primary, who backs it up, who stands by. It
/// changes only through [`Command::ChangeView`] committed by the config store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    /// Starts at 1 for a group's first view and grows by exactly one per change; 0 means the
    /// group has no view yet.
    pub number: u64,
    pub primary: NodeId,
    pub backups: Vec<NodeId>,
    pub spares: Vec<NodeId>,
    /// The group's most recent promotions, oldest first, at most [`PROMOTIONS_KEPT`]; every
    /// view change carries them on, a promotion appends itself. A member that follows a
    /// new primary keeps only its records up to the truncate LSN of the first promotion after
    /// the view it followed, however many views it missed (a node that learned a later view
    /// directly once kept records a skipped promotion had discarded; the simulator found a
    /// call applied twice that way).
    pub promotions: Vec<Promotion>,
    /// Whether the primary may be the only member holding records a reply was released for
    /// since the last promotion, so that the last promotion's
    /// [`Promotion::lsn_released_max`] no longer bounds what the view's spares must hold to
    /// take its place. A change under the same primary sets it when it leaves the view
    /// without backups (every backup had restarted without its memory, and the coordinator
    /// left them out, `Cluster::maybe_leave_out_restarted`); it stays set while the view has
    /// no backup, and goes with the first view that names one (a spare becomes a backup only
    /// holding every released record) or a promotion. While it is set, under a rule that
    /// waits for backups, no spare takes the primary's place; the primary's own report, once
    /// it restarted, may (any-time seed 1301508: a spare whose log stopped below what the
    /// primary had released with the backup it then left out was promoted, and an
    /// acknowledged commit was lost).
    pub primary_sole_holder: bool,
}

/// A view change that made a backup the primary (DESIGN.md, "Promotion rule").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Promotion {
    /// The view it made.
    pub view: u64,
    /// The promoted backup's received LSN: every member discards records above it.
    pub truncate_lsn: u64,
    /// The view whose history the promoted node's records follow. `None`: the view before
    /// this one, whose backup reported (every promotion of a failed primary). `Some(view)`:
    /// an older one, for a recovery that passes over a promotion whose primary never
    /// served (it restarted without its memory before the view that named it was
    /// committed): the new primary holds the records of the view it last followed.
    pub based_on: Option<u64>,
    /// Every record a reply was released for up to this promotion lies at or below this
    /// LSN, as the reports it was made from show (0 under a rule that releases before any
    /// backup holds a record: it promises nothing). A later promotion needs a reporter that
    /// holds it. Below `truncate_lsn` when the reporters held different LSNs: the highest is
    /// promoted, but a record only it held reached too few backups to be released (the
    /// simulator found a group down for good: the promoted node died at once, and the
    /// remaining backup, one record short of the truncate LSN, was refused).
    pub lsn_released_max: u64,
    /// The members of the view it made that it named from a report of records rebuilt
    /// from their log after a restart, each with the life of the node that sent that report
    /// (its config store's incarnation, which no other life of that node shares): that life
    /// serves in the view from those records; any other may not (its lost life may have
    /// served in the view and acknowledged records its log never kept). Empty when no such
    /// report named a member.
    pub rebuilt: Vec<(NodeId, u64)>,
}

impl Promotion {
    /// The view whose history the promoted node's records follow.
    pub fn based_on(&self) -> u64 {
        self.based_on.unwrap_or(self.view - 1)
    }
}

/// Up to where the histories of two views agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Agreement {
    /// No promotion lies between them: one history.
    Whole,
    /// They agree up to this LSN.
    UpTo(u64),
    /// A promotion between them may have been dropped from the view's list.
    Unknown,
}

/// How many promotions a view remembers. A member that missed more than this many since the
/// view it followed cannot tell which of its records survive: it reloads.
pub const PROMOTIONS_KEPT: usize = 16;

/// What happened to the records a member held as of an earlier view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinceView {
    /// No promotion since: the same primary reigns and every record stands.
    Kept,
    /// Records above this LSN were discarded by a promotion since: the lowest truncate LSN
    /// of those promotions (a later promotion may truncate below an earlier one, under a
    /// rule that lets a member behind take over).
    TruncatedAt(u64),
    /// More promotions happened than the view remembers: no record can be trusted.
    Unknown,
}

/// What a node is in a view: one name for the place the view gives it, used wherever a
/// node's place is asked (the cluster core's failure detector, `/status`, the simulator).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member {
    Primary,
    /// Its acks count for the release rules.
    Backup,
    /// It catches up from the primary; its acks count for nothing until a view makes it a
    /// backup.
    Spare,
    /// The view does not name it.
    Outside,
}

impl View {
    /// What node `node` is in this view.
    pub fn member(&self, node: NodeId) -> Member {
        if self.primary == node {
            Member::Primary
        } else if self.backups.contains(&node) {
            Member::Backup
        } else if self.spares.contains(&node) {
            Member::Spare
        } else {
            Member::Outside
        }
    }

    /// The truncate LSN of the promotion that made this view, if it made one.
    pub fn truncate_lsn(&self) -> Option<u64> {
        self.promotions
            .last()
            .filter(|promotion| promotion.view == self.number)
            .map(|promotion| promotion.truncate_lsn)
    }

    /// What became of the records a member held as of view `view` (older than this one).
    pub fn since(&self, view: u64) -> SinceView {
        assert!(
            view <= self.number,
            "a view is asked only about older views"
        );
        match self.agreement(view, self.number) {
            Agreement::Whole => SinceView::Kept,
            Agreement::UpTo(lsn) => SinceView::TruncatedAt(lsn),
            Agreement::Unknown => SinceView::Unknown,
        }
    }

    /// Up to where the histories of views `a` and `b` (neither newer than this view) agree.
    /// The last promotion between them made the newer one's history from its base view's,
    /// cut at its truncate LSN; the base and the older view agree as far as the promotions
    /// between those two allow. Every promotion's base is older than it, so this ends.
    fn agreement(&self, a: u64, b: u64) -> Agreement {
        let (older, newer) = (a.min(b), a.max(b));
        if older == newer {
            return Agreement::Whole;
        }
        let last = self
            .promotions
            .iter()
            .rev()
            .find(|promotion| promotion.view > older && promotion.view <= newer);
        let Some(last) = last else {
            // Promotions older than the first kept may have been dropped, and one of them
            // may lie between the two.
            let dropped =
                self.promotions.len() == PROMOTIONS_KEPT && older < self.promotions[0].view;
            return if dropped {
                Agreement::Unknown
            } else {
                Agreement::Whole
            };
        };
        match self.agreement(last.based_on(), older) {
            Agreement::Whole => Agreement::UpTo(last.truncate_lsn),
            Agreement::UpTo(lsn) => Agreement::UpTo(lsn.min(last.truncate_lsn)),
            Agreement::Unknown => Agreement::Unknown,
        }
    }

    /// This view's promotions followed by one that makes view `number` at `truncate_lsn`.
    /// `based_on`: see [`Promotion::based_on`].
    pub fn promotions_with(
        &self,
        number: u64,
        truncate_lsn: u64,
        based_on: Option<u64>,
        lsn_released_max: u64,
    ) -> Vec<Promotion> {
        assert!(number > self.number, "a promotion makes a newer view");
        assert!(
            lsn_released_max <= truncate_lsn,
            "the promoted node holds every released record"
        );
        if let Some(base) = based_on {
            assert!(base < number, "a promotion's base view is older than it");
        }
        let mut promotions = self.promotions.clone();
        promotions.push(Promotion {
            view: number,
            truncate_lsn,
            based_on,
            lsn_released_max,
            rebuilt: Vec::new(),
        });
        if promotions.len() > PROMOTIONS_KEPT {
            promotions.remove(0);
        }
        promotions
    }

    /// The next view under the same primary, with `backups` and `spares`: a membership
    /// change. It carries the promotions on, and sets [`View::primary_sole_holder`] when it
    /// leaves a view with backups without any (keeps it while none is named, clears it once
    /// one is).
    pub fn with_members(&self, backups: Vec<NodeId>, spares: Vec<NodeId>) -> View {
        let primary_sole_holder =
            backups.is_empty() && (self.primary_sole_holder || !self.backups.is_empty());
        View {
            number: self.number + 1,
            primary: self.primary,
            backups,
            spares,
            promotions: self.promotions.clone(),
            primary_sole_holder,
        }
    }

    /// Primary first, then backups, then spares.
    pub fn members(&self) -> impl Iterator<Item = NodeId> + '_ {
        std::iter::once(self.primary)
            .chain(self.backups.iter().copied())
            .chain(self.spares.iter().copied())
    }

    /// Checks the view against the nodes the cluster knows. The order of the checks is part of
    /// the replicated decision: every replica must report the same reason.
    pub fn validate(&self, nodes: &BTreeMap<NodeId, NodeInfo>) -> Result<(), ViewError> {
        if self.number == 0 {
            return Err(ViewError::NumberZero);
        }
        if self.backups.contains(&self.primary) || self.spares.contains(&self.primary) {
            return Err(ViewError::PrimaryAlsoListed { node: self.primary });
        }
        let mut seen = BTreeSet::new();
        for node in self.members() {
            if !seen.insert(node) {
                return Err(ViewError::Duplicate { node });
            }
            if !nodes.contains_key(&node) {
                return Err(ViewError::UnknownNode { node });
            }
        }
        if self.promotions.len() > PROMOTIONS_KEPT {
            return Err(ViewError::TooManyPromotions {
                count: self.promotions.len(),
            });
        }
        let mut after = 0;
        for promotion in &self.promotions {
            if promotion.view <= after || promotion.view > self.number {
                return Err(ViewError::PromotionsOutOfOrder {
                    view: promotion.view,
                });
            }
            if promotion
                .based_on
                .is_some_and(|base| base >= promotion.view)
            {
                return Err(ViewError::PromotionBaseNotOlder {
                    view: promotion.view,
                });
            }
            after = promotion.view;
        }
        if self.primary_sole_holder && !self.backups.is_empty() {
            return Err(ViewError::SoleHolderWithBackups);
        }
        Ok(())
    }
}

/// Why a view is not well formed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ViewError {
    #[error("view number 0 means 'no view yet'; a view is numbered from 1")]
    NumberZero,
    #[error("primary {node} is also listed as a backup or a spare")]
    PrimaryAlsoListed { node: NodeId },
    #[error("node {node} is listed twice among the backups and spares")]
    Duplicate { node: NodeId },
    #[error("{count} promotions; a view keeps at most {PROMOTIONS_KEPT}")]
    TooManyPromotions { count: usize },
    #[error(
        "the promotion of view {view} is out of order: promotions must be listed oldest \
         first, each older than the view"
    )]
    PromotionsOutOfOrder { view: u64 },
    #[error("the promotion of view {view} is based on a view that is not older than it")]
    PromotionBaseNotOlder { view: u64 },
    #[error("node {node} is not a node of the cluster map")]
    UnknownNode { node: NodeId },
    #[error("the view names backups but says its primary is the only holder of what it released")]
    SoleHolderWithBackups,
}

/// A node as the cluster map records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeInfo {
    pub id: NodeId,
    /// "ip:port" exactly as the operator gave it; the runtime resolves it.
    pub address: String,
}

/// What the config store replicates: the nodes, each group's current view, and which group
/// serves each hash slot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMap {
    pub nodes: BTreeMap<NodeId, NodeInfo>,
    pub groups: BTreeMap<GroupId, View>,
    pub slots: SlotTable,
}

/// Why a map is not well formed (an initial map, or one decoded from a snapshot).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MapError {
    #[error("nodes[{key}] holds node {id}: the key must be the node's id")]
    NodeKeyMismatch { key: NodeId, id: NodeId },
    #[error("groups[{group}]: {error}")]
    InvalidView { group: GroupId, error: ViewError },
    #[error("slots: {0}")]
    InvalidSlots(#[from] SlotError),
}

impl ClusterMap {
    pub fn validate(&self) -> Result<(), MapError> {
        for (&key, info) in &self.nodes {
            if key != info.id {
                return Err(MapError::NodeKeyMismatch { key, id: info.id });
            }
        }
        for (&group, view) in &self.groups {
            view.validate(&self.nodes)
                .map_err(|error| MapError::InvalidView { group, error })?;
        }
        self.slots.validate(&self.groups)?;
        Ok(())
    }

    /// The group that serves hash slot `slot`: the slot table's, or, while the slots were
    /// never assigned, the lowest group's (a cluster of one group serves every slot).
    pub fn slot_group(&self, slot: u16) -> Option<GroupId> {
        if self.slots.is_empty() {
            return self
                .groups
                .keys()
                .next()
                .copied()
                .filter(|_| slot < SLOT_COUNT);
        }
        self.slots.group_of(slot)
    }

    /// The group's view number; 0 for a group without a view, so that `ChangeView` with
    /// `from_view: 0` creates a group.
    pub fn view_number(&self, group: GroupId) -> u64 {
        self.groups.get(&group).map_or(0, |view| view.number)
    }

    /// Applies one committed command, or rejects it without changing anything.
    pub fn apply(&mut self, command: &Command) -> Result<(), Rejection> {
        match command {
            Command::ChangeView {
                group,
                from_view,
                view,
            } => {
                let group = *group;
                let current = self.view_number(group);
                if current != *from_view {
                    return Err(Rejection::StaleFromView {
                        group,
                        current,
                        from_view: *from_view,
                    });
                }
                // A `from_view` of u64::MAX has no successor: reject rather than wrap to 0.
                let expected = from_view.checked_add(1);
                if expected != Some(view.number) {
                    return Err(Rejection::NotNextNumber {
                        group,
                        number: view.number,
                        from_view: *from_view,
                    });
                }
                view.validate(&self.nodes)
                    .map_err(|error| Rejection::InvalidView { group, error })?;
                let old = self.groups.insert(group, view.clone());
                assert_eq!(old.map_or(0, |old| old.number) + 1, view.number);
                Ok(())
            }
        }
    }
}

/// A change to the cluster map, proposed through the config store's Raft log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Command {
    /// Replace a group's view: applied only if the group's current view number is `from_view`
    /// (0 if the group has none yet) and `view.number == from_view + 1`; otherwise rejected (a
    /// racing proposal won). This is what makes concurrent view-change proposals safe: of two
    /// proposals built on the same view, the first committed wins and the second is rejected
    /// on every replica.
    ChangeView {
        group: GroupId,
        from_view: u64,
        view: View,
    },
}

/// Why a committed entry did not change the map. Every replica reaches the same rejection for
/// the same entry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    #[error("group {group} is at view {current}, not {from_view}: a racing view change won")]
    StaleFromView {
        group: GroupId,
        current: u64,
        from_view: u64,
    },
    #[error("the new view of group {group} is numbered {number}; it must be {from_view} + 1")]
    NotNextNumber {
        group: GroupId,
        number: u64,
        from_view: u64,
    },
    #[error("invalid view for group {group}: {error}")]
    InvalidView { group: GroupId, error: ViewError },
    #[error("the entry's bytes do not decode as a command")]
    Undecodable,
    #[error("entry type {entry_type} is not used by the config store (no membership changes)")]
    UnsupportedEntry { entry_type: i32 },
}

/// Encodes a command for the Raft log.
pub(crate) fn encode_command(command: &Command) -> Vec<u8> {
    postcard::to_allocvec(command).expect("a command always serializes")
}

/// Decodes a command from a Raft entry; the bytes are untrusted, trailing bytes are refused.
pub(crate) fn decode_command(bytes: &[u8]) -> Option<Command> {
    match postcard::take_from_bytes::<Command>(bytes) {
        Ok((command, [])) => Some(command),
        _ => None,
    }
}

/// Encodes a map for a Raft snapshot.
pub(crate) fn encode_map(map: &ClusterMap) -> Vec<u8> {
    postcard::to_allocvec(map).expect("a map always serializes")
}

/// Decodes and validates a map from a Raft snapshot; the bytes are untrusted.
pub(crate) fn decode_map(bytes: &[u8]) -> Option<ClusterMap> {
    match postcard::take_from_bytes::<ClusterMap>(bytes) {
        Ok((map, [])) if map.validate().is_ok() => Some(map),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(nodes: &[NodeId]) -> ClusterMap {
        ClusterMap {
            nodes: nodes
                .iter()
                .map(|&id| {
                    let address = format!("10.0.0.{id}:7000");
                    (id, NodeInfo { id, address })
                })
                .collect(),
            groups: BTreeMap::new(),
            slots: SlotTable::default(),
        }
    }

    fn view(number: u64, primary: NodeId, backups: &[NodeId], spares: &[NodeId]) -> View {
        View {
            number,
            primary,
            backups: backups.to_vec(),
            spares: spares.to_vec(),
            promotions: Vec::new(),
            primary_sole_holder: false,
        }
    }

    fn change(group: GroupId, from_view: u64, view: View) -> Command {
        Command::ChangeView {
            group,
            from_view,
            view,
        }
    }

    #[test]
    fn view_validation_names_the_offending_node() {
        let nodes = map(&[1, 2, 3, 4]).nodes;
        assert_eq!(view(1, 1, &[2, 3], &[4]).validate(&nodes), Ok(()));
        assert_eq!(
            view(0, 1, &[2], &[]).validate(&nodes),
            Err(ViewError::NumberZero)
        );
        let primary_listed = Err(ViewError::PrimaryAlsoListed { node: 1 });
        assert_eq!(view(1, 1, &[1], &[]).validate(&nodes), primary_listed);
        assert_eq!(view(1, 1, &[2], &[1]).validate(&nodes), primary_listed);
        let duplicate = Err(ViewError::Duplicate { node: 2 });
        assert_eq!(view(1, 1, &[2, 2], &[]).validate(&nodes), duplicate);
        assert_eq!(view(1, 1, &[2], &[2]).validate(&nodes), duplicate);
        let unknown = Err(ViewError::UnknownNode { node: 9 });
        assert_eq!(view(1, 9, &[2], &[]).validate(&nodes), unknown);
        assert_eq!(view(1, 1, &[9], &[]).validate(&nodes), unknown);
        assert_eq!(view(1, 1, &[2], &[9]).validate(&nodes), unknown);
    }

    #[test]
    fn change_view_needs_the_current_view_and_the_next_number() {
        let mut map = map(&[1, 2, 3, 4]);
        // A group without a view is at view 0: from_view 0 creates it.
        assert_eq!(map.apply(&change(7, 0, view(1, 1, &[2, 3], &[]))), Ok(()));
        assert_eq!(map.view_number(7), 1);
        let before = map.clone();

        let stale = change(7, 0, view(1, 2, &[1], &[]));
        let expected = Rejection::StaleFromView {
            group: 7,
            current: 1,
            from_view: 0,
        };
        assert_eq!(map.apply(&stale), Err(expected));
        let skip = change(7, 1, view(3, 2, &[1], &[]));
        let expected = Rejection::NotNextNumber {
            group: 7,
            number: 3,
            from_view: 1,
        };
        assert_eq!(map.apply(&skip), Err(expected));
        let invalid = change(7, 1, view(2, 2, &[2], &[]));
        let expected = Rejection::InvalidView {
            group: 7,
            error: ViewError::PrimaryAlsoListed { node: 2 },
        };
        assert_eq!(map.apply(&invalid), Err(expected));
        assert_eq!(map, before, "a rejected command changes nothing");

        // The last view number has no successor: rejected, never wrapped to 0.
        let mut at_max = map.clone();
        at_max.groups.insert(8, view(u64::MAX, 1, &[], &[]));
        let overflow = change(8, u64::MAX, view(0, 2, &[1], &[]));
        let expected = Rejection::NotNextNumber {
            group: 8,
            number: 0,
            from_view: u64::MAX,
        };
        assert_eq!(at_max.apply(&overflow), Err(expected));

        assert_eq!(map.apply(&change(7, 1, view(2, 2, &[3], &[1, 4]))), Ok(()));
        assert_eq!(map.groups[&7], view(2, 2, &[3], &[1, 4]));
    }

    #[test]
    fn map_validation_and_codecs() {
        let mut good = map(&[1, 2, 3]);
        good.groups.insert(1, view(1, 1, &[2], &[3]));
        assert_eq!(good.validate(), Ok(()));
        assert_eq!(decode_map(&encode_map(&good)), Some(good.clone()));
        let mut with_trailing = encode_map(&good);
        with_trailing.push(0);
        assert_eq!(decode_map(&with_trailing), None);

        let mut bad_key = good.clone();
        bad_key.nodes.get_mut(&2).expect("node 2").id = 5;
        let expected = MapError::NodeKeyMismatch { key: 2, id: 5 };
        assert_eq!(bad_key.validate(), Err(expected));
        assert_eq!(
            decode_map(&encode_map(&bad_key)),
            None,
            "a decoded map is validated"
        );

        let command = change(1, 1, view(2, 2, &[1], &[]));
        assert_eq!(decode_command(&encode_command(&command)), Some(command));
        for len in 0..32 {
            let garbage: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let _ = decode_command(&garbage);
            let _ = decode_map(&garbage);
        }
    }
}
