//! Which group serves each of Redis Cluster's 16,384 hash slots: the cluster map's slot
//! table. A key's slot is the CRC16 of the key (or of its hash tag) modulo [`SLOT_COUNT`]
//! (`tandem_redis::slot`); the table assigns every slot to exactly one group, in contiguous
//! inclusive ranges, so that clients route each command to the primary of the group that
//! holds its keys (docs/many-groups.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::map::{GroupId, View};

/// How many slots the keyspace is split into (Redis Cluster's `CLUSTER_SLOTS`).
pub const SLOT_COUNT: u16 = 16_384;

/// Slots `first..=last`, served by `group`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRange {
    pub first: u16,
    pub last: u16,
    pub group: GroupId,
}

/// The slot table: ranges in slot order, covering `0..SLOT_COUNT` without gap or overlap
/// once assigned, adjacent ranges of one group merged. An empty table is one whose slots
/// were never assigned: the map's lowest group serves every slot (a cluster of one group).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotTable {
    ranges: Vec<SlotRange>,
}

/// Why a slot table is not well formed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SlotError {
    #[error("slot range {first}..={last} is empty or runs past slot {}", SLOT_COUNT - 1)]
    BadRange { first: u16, last: u16 },
    #[error("slot {slot} is served by no group (the ranges must cover 0..={})", SLOT_COUNT - 1)]
    Unserved { slot: u16 },
    #[error("slot {slot} is in two ranges (they must be in slot order, without overlap)")]
    Overlap { slot: u16 },
    #[error("slots {first}..={last} are given to group {group}, which the map does not hold")]
    UnknownGroup {
        first: u16,
        last: u16,
        group: GroupId,
    },
}

impl SlotTable {
    /// Every slot split over `groups` in their order, as `redis-cli --cluster create` splits
    /// them over its masters: the i-th group gets the slots from where the last one ended up
    /// to `round((i + 1) * SLOT_COUNT / n) - 1`, the last group up to the last slot. No
    /// groups: the empty table. At most [`SLOT_COUNT`] groups (each gets a slot at least).
    pub fn even(groups: &[GroupId]) -> SlotTable {
        assert!(
            groups.len() <= usize::from(SLOT_COUNT),
            "{} groups cannot each serve one of {SLOT_COUNT} slots",
            groups.len()
        );
        // In `f32`, as redis-cli computes it, so that every count of groups splits alike.
        let per_group = f32::from(SLOT_COUNT) / groups.len() as f32;
        let mut ranges = Vec::with_capacity(groups.len());
        let (mut first, mut cursor) = (0u16, 0f32);
        for (index, &group) in groups.iter().enumerate() {
            let last = if index + 1 == groups.len() {
                SLOT_COUNT - 1
            } else {
                // Below SLOT_COUNT: the cursor is short of the last group's share.
                ((cursor + per_group - 1.0).round() as u16).clamp(first, SLOT_COUNT - 1)
            };
            ranges.push(SlotRange { first, last, group });
            first = last + 1;
            cursor += per_group;
        }
        SlotTable { ranges }
    }

    /// A table of `ranges`, checked to cover every slot once, in order.
    pub fn from_ranges(ranges: Vec<SlotRange>) -> Result<SlotTable, SlotError> {
        let table = SlotTable { ranges };
        table.check_cover()?;
        Ok(table)
    }

    /// Whether the slots were never assigned.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ranges, in slot order.
    pub fn ranges(&self) -> &[SlotRange] {
        &self.ranges
    }

    /// The group that serves `slot` by the table (`None` if it was never assigned, or the
    /// slot is past the last).
    pub fn group_of(&self, slot: u16) -> Option<GroupId> {
        let at = self.ranges.partition_point(|range| range.last < slot);
        let range = self.ranges.get(at)?;
        (range.first <= slot).then_some(range.group)
    }

    /// The ranges `group` serves, in slot order.
    pub fn ranges_of(&self, group: GroupId) -> impl Iterator<Item = (u16, u16)> + '_ {
        (self.ranges.iter())
            .filter(move |range| range.group == group)
            .map(|range| (range.first, range.last))
    }

    /// Checks the table against the map's `groups`: an assigned table covers every slot
    /// once, in order, each range given to a group the map holds.
    pub fn validate(&self, groups: &BTreeMap<GroupId, View>) -> Result<(), SlotError> {
        if self.ranges.is_empty() {
            return Ok(());
        }
        self.check_cover()?;
        for range in &self.ranges {
            if !groups.contains_key(&range.group) {
                return Err(SlotError::UnknownGroup {
                    first: range.first,
                    last: range.last,
                    group: range.group,
                });
            }
        }
        Ok(())
    }

    /// Every slot in exactly one range, the ranges in slot order.
    fn check_cover(&self) -> Result<(), SlotError> {
        let mut next = 0u32;
        for range in &self.ranges {
            if range.first > range.last || range.last >= SLOT_COUNT {
                return Err(SlotError::BadRange {
                    first: range.first,
                    last: range.last,
                });
            }
            let first = u32::from(range.first);
            if first > next {
                return Err(SlotError::Unserved { slot: next as u16 });
            }
            if first < next {
                return Err(SlotError::Overlap { slot: range.first });
            }
            next = u32::from(range.last) + 1;
        }
        if next < u32::from(SLOT_COUNT) {
            return Err(SlotError::Unserved { slot: next as u16 });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(primary: u32) -> View {
        View {
            number: 1,
            primary,
            backups: Vec::new(),
            spares: Vec::new(),
            promotions: Vec::new(),
            primary_sole_holder: false,
        }
    }

    /// `redis-cli --cluster create` with three masters gives 0-5460, 5461-10922 and
    /// 10923-16383; with one, every slot; the split never leaves a slot out.
    #[test]
    fn an_even_split_is_redis_clis() {
        let three = SlotTable::even(&[1, 2, 3]);
        let ranges: Vec<(u16, u16, u32)> = (three.ranges().iter())
            .map(|range| (range.first, range.last, range.group))
            .collect();
        assert_eq!(ranges, [(0, 5460, 1), (5461, 10922, 2), (10923, 16383, 3)]);
        assert_eq!(
            SlotTable::even(&[7]).ranges_of(7).collect::<Vec<_>>(),
            [(0, 16383)]
        );
        for groups in 1..=64u32 {
            let ids: Vec<GroupId> = (1..=groups).collect();
            let table = SlotTable::even(&ids);
            assert_eq!(table.check_cover(), Ok(()), "{groups} groups");
            assert_eq!(table.ranges().len(), groups as usize);
        }
        assert!(SlotTable::even(&[]).is_empty());
    }

    #[test]
    fn every_slot_has_the_group_of_its_range() {
        let table = SlotTable::even(&[4, 9]);
        assert_eq!(table.group_of(0), Some(4));
        assert_eq!(table.group_of(8191), Some(4));
        assert_eq!(table.group_of(8192), Some(9));
        assert_eq!(table.group_of(16383), Some(9));
        assert_eq!(table.group_of(16384), None);
        assert_eq!(SlotTable::default().group_of(0), None);
    }

    #[test]
    fn a_gap_an_overlap_a_bad_range_or_an_unknown_group_is_refused() {
        let range = |first, last, group| SlotRange { first, last, group };
        assert_eq!(
            SlotTable::from_ranges(vec![range(0, 99, 1), range(101, 16383, 2)]),
            Err(SlotError::Unserved { slot: 100 })
        );
        assert_eq!(
            SlotTable::from_ranges(vec![range(0, 100, 1), range(100, 16383, 2)]),
            Err(SlotError::Overlap { slot: 100 })
        );
        assert_eq!(
            SlotTable::from_ranges(vec![range(0, 16382, 1)]),
            Err(SlotError::Unserved { slot: 16383 })
        );
        assert_eq!(
            SlotTable::from_ranges(vec![range(0, 16384, 1)]),
            Err(SlotError::BadRange {
                first: 0,
                last: 16384
            })
        );
        assert_eq!(
            SlotTable::from_ranges(vec![range(5, 4, 1)]),
            Err(SlotError::BadRange { first: 5, last: 4 })
        );
        let table = SlotTable::even(&[1, 2]);
        let groups: BTreeMap<GroupId, View> = [(1, view(1))].into_iter().collect();
        assert_eq!(
            table.validate(&groups),
            Err(SlotError::UnknownGroup {
                first: 8192,
                last: 16383,
                group: 2
            })
        );
        assert_eq!(SlotTable::default().validate(&groups), Ok(()));
    }
}
