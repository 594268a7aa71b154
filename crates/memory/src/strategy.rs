//! The four logging strategies: how a txn keeps what it needs to undo itself.
//!
//! They are built as section 4 of seed 000 describes, so that their costs can be compared:
//!
//! - V0 (Vista): each `set_range` allocates an undo record on the heap, links it at the head of
//!   a list, and copies the old bytes into a second heap allocation. Commit frees both.
//! - V1 (mirror by copy): `set_range` appends its coordinates to an array; a mirror holds the
//!   last committed image of the whole segment. Commit copies every declared range into the
//!   mirror; abort copies it back from the mirror.
//! - V2 (mirror by diff): as V1, but commit compares each declared range against the mirror and
//!   writes only the words that differ.
//! - V3 (in-line undo log): `set_range` appends offset, length and the old bytes to one
//!   contiguous log; commit moves the log's end back to its start.
//!
//! Every strategy also yields the undo image redo capture compares against: the old bytes of
//! V0 and V3, the mirror of V1 and V2.

use std::fmt;
use std::str::FromStr;

use crate::redo::{Run, diff_words, extend_small, normalize_runs, sort_small_by_key};
use crate::segment::region::Region;

/// How a segment's txns keep undo information; fixed when the segment is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Strategy {
    /// V0: heap-allocated undo records in a linked list (Vista).
    V0LinkedUndo,
    /// V1: range array plus a mirror updated by copying at commit.
    V1MirrorCopy,
    /// V2: range array plus a mirror updated by comparing at commit.
    V2MirrorDiff,
    /// V3: in-line undo log of offset, length and old bytes.
    V3InlineLog,
}

impl Strategy {
    /// All strategies, in version order.
    pub const ALL: [Strategy; 4] = [
        Strategy::V0LinkedUndo,
        Strategy::V1MirrorCopy,
        Strategy::V2MirrorDiff,
        Strategy::V3InlineLog,
    ];

    /// The short name used on the command line and in reports: `v0` to `v3`.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::V0LinkedUndo => "v0",
            Strategy::V1MirrorCopy => "v1",
            Strategy::V2MirrorDiff => "v2",
            Strategy::V3InlineLog => "v3",
        }
    }

    /// Whether the strategy keeps a mirror copy of the segment (doubling its memory).
    pub fn has_mirror(self) -> bool {
        matches!(self, Strategy::V1MirrorCopy | Strategy::V2MirrorDiff)
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A strategy name that is not one of `v0`, `v1`, `v2`, `v3`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown logging strategy '{0}'; accepted values: v0, v1, v2, v3")]
pub struct ParseStrategyError(pub String);

impl FromStr for Strategy {
    type Err = ParseStrategyError;

    fn from_str(text: &str) -> Result<Strategy, ParseStrategyError> {
        Strategy::ALL
            .into_iter()
            .find(|strategy| strategy.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| ParseStrategyError(text.to_owned()))
    }
}

/// The undo state of one segment under its strategy.
#[derive(Debug)]
pub(crate) enum Undo {
    Linked(LinkedUndo),
    MirrorCopy(MirrorUndo),
    MirrorDiff(MirrorUndo),
    Inline(InlineUndo),
}

/// V0: a singly linked list of heap records, newest first.
#[derive(Debug, Default)]
pub(crate) struct LinkedUndo {
    head: Option<Box<UndoNode>>,
}

#[derive(Debug)]
struct UndoNode {
    offset: usize,
    old: Box<[u8]>,
    next: Option<Box<UndoNode>>,
}

/// V1 and V2: the declared ranges and the mirror of the last committed image.
#[derive(Debug)]
pub(crate) struct MirrorUndo {
    mirror: Region,
    /// (offset, len) of each `set_range`, in declaration order.
    ranges: Vec<(usize, usize)>,
}

/// V3: entries of `[offset u64][len u64][old bytes]`, in declaration order.
#[derive(Debug, Default)]
pub(crate) struct InlineUndo {
    log: Vec<u8>,
}

const INLINE_HEADER_LEN: usize = 16;

impl InlineUndo {
    /// Appends offset, length and the old bytes at the end of the log.
    #[inline]
    fn declare(&mut self, data: &[u8], offset: usize, len: usize) {
        let mut header = [0u8; INLINE_HEADER_LEN];
        header[..8].copy_from_slice(&(offset as u64).to_le_bytes());
        header[8..].copy_from_slice(&(len as u64).to_le_bytes());
        // The log keeps its capacity between txns, so after warm-up this never allocates.
        self.log.reserve(INLINE_HEADER_LEN + len);
        self.log.extend_from_slice(&header);
        extend_small(&mut self.log, &data[offset..offset + len]);
    }

    /// Each entry as (offset, old bytes), in declaration order.
    fn entries(&self) -> impl Iterator<Item = (usize, &[u8])> + Clone + '_ {
        self.entry_positions()
            .map(|(offset, len, start)| (offset, &self.log[start..start + len]))
    }

    /// Each entry as (offset, length, position of its old bytes in the log).
    fn entry_positions(&self) -> impl Iterator<Item = (usize, usize, usize)> + Clone + '_ {
        let mut pos = 0usize;
        std::iter::from_fn(move || {
            if pos == self.log.len() {
                return None;
            }
            let header = &self.log[pos..pos + INLINE_HEADER_LEN];
            let offset = u64::from_le_bytes(header[..8].try_into().expect("8 bytes")) as usize;
            let len = u64::from_le_bytes(header[8..].try_into().expect("8 bytes")) as usize;
            let start = pos + INLINE_HEADER_LEN;
            pos = start + len;
            Some((offset, len, start))
        })
    }
}

impl LinkedUndo {
    /// Allocates a record and a copy of the old bytes, and links the record at the head.
    #[inline]
    fn declare(&mut self, data: &[u8], offset: usize, len: usize) {
        let old: Box<[u8]> = Box::from(&data[offset..offset + len]);
        let next = self.head.take();
        self.head = Some(Box::new(UndoNode { offset, old, next }));
    }

    /// Each record as (offset, old bytes), newest first.
    fn entries(&self) -> impl Iterator<Item = (usize, &[u8])> + Clone + '_ {
        let mut node = self.head.as_deref();
        std::iter::from_fn(move || {
            let current = node?;
            node = current.next.as_deref();
            Some((current.offset, &current.old[..]))
        })
    }

    /// Frees the list one node at a time; a recursive drop could overflow the stack.
    fn free(&mut self) {
        let mut node = self.head.take();
        while let Some(mut current) = node {
            node = current.next.take();
        }
    }
}

impl Drop for LinkedUndo {
    fn drop(&mut self) {
        self.free();
    }
}

/// Reusable buffers for commit-time capture, so a steady-state commit allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    spans: Vec<(usize, usize)>,
    /// (offset, length, position of the old bytes in the V3 log).
    images: Vec<(usize, usize, usize)>,
}

impl Undo {
    pub(crate) fn new(strategy: Strategy, segment_len: usize) -> std::io::Result<Undo> {
        Ok(match strategy {
            Strategy::V0LinkedUndo => Undo::Linked(LinkedUndo::default()),
            Strategy::V1MirrorCopy => Undo::MirrorCopy(MirrorUndo::new(segment_len)?),
            Strategy::V2MirrorDiff => Undo::MirrorDiff(MirrorUndo::new(segment_len)?),
            Strategy::V3InlineLog => Undo::Inline(InlineUndo::default()),
        })
    }

    pub(crate) fn strategy(&self) -> Strategy {
        match self {
            Undo::Linked(_) => Strategy::V0LinkedUndo,
            Undo::MirrorCopy(_) => Strategy::V1MirrorCopy,
            Undo::MirrorDiff(_) => Strategy::V2MirrorDiff,
            Undo::Inline(_) => Strategy::V3InlineLog,
        }
    }

    /// Whether no range is declared: true between txns.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Undo::Linked(undo) => undo.head.is_none(),
            Undo::MirrorCopy(undo) | Undo::MirrorDiff(undo) => undo.ranges.is_empty(),
            Undo::Inline(undo) => undo.log.is_empty(),
        }
    }

    /// Records what is needed to undo writes to `data[offset..offset + len]`.
    #[inline]
    pub(crate) fn declare(&mut self, data: &[u8], offset: usize, len: usize) {
        debug_assert!(len > 0);
        debug_assert!(offset + len <= data.len());
        match self {
            Undo::Linked(undo) => undo.declare(data, offset, len),
            Undo::MirrorCopy(undo) | Undo::MirrorDiff(undo) => undo.ranges.push((offset, len)),
            Undo::Inline(undo) => undo.declare(data, offset, len),
        }
    }

    /// Whether `[offset, offset + len)` lies inside one declared range.
    pub(crate) fn covers(&self, offset: usize, len: usize) -> bool {
        let inside = |start: usize, declared_len: usize| {
            start <= offset && offset + len <= start + declared_len
        };
        match self {
            Undo::Linked(undo) => undo.entries().any(|(start, old)| inside(start, old.len())),
            Undo::MirrorCopy(undo) | Undo::MirrorDiff(undo) => undo
                .ranges
                .iter()
                .any(|&(start, declared_len)| inside(start, declared_len)),
            Undo::Inline(undo) => undo.entries().any(|(start, old)| inside(start, old.len())),
        }
    }

    /// Restores every declared byte to its value before the txn, then forgets the ranges.
    pub(crate) fn abort(&mut self, data: &mut [u8]) {
        match self {
            Undo::Linked(undo) => {
                // Newest first: where ranges overlap, the oldest image is written last and wins.
                for (offset, old) in undo.entries() {
                    data[offset..offset + old.len()].copy_from_slice(old);
                }
                undo.free();
            }
            Undo::MirrorCopy(undo) | Undo::MirrorDiff(undo) => {
                let mirror = undo.mirror.bytes();
                for &(offset, len) in &undo.ranges {
                    data[offset..offset + len].copy_from_slice(&mirror[offset..offset + len]);
                }
                undo.ranges.clear();
            }
            Undo::Inline(undo) => {
                // Entries have variable length, so find their starts first, then undo newest
                // first. Aborts are rare; this pass is off the commit path.
                let entries: Vec<(usize, &[u8])> = undo.entries().collect();
                for &(offset, old) in entries.iter().rev() {
                    data[offset..offset + old.len()].copy_from_slice(old);
                }
                undo.log.clear();
            }
        }
        debug_assert!(self.is_empty());
    }

    /// Appends to `runs` the changed words of every declared range, sorted by offset and
    /// coalesced (no two runs overlap or touch), and brings the strategy's own state up to the
    /// committed image (mirror updated, undo records released).
    ///
    /// V1, V2 and V3 diff their ranges in offset order, so their runs come out sorted; V0 and
    /// overlapping ranges sort theirs afterwards.
    #[inline]
    pub(crate) fn commit(&mut self, data: &[u8], scratch: &mut Scratch, runs: &mut Vec<Run>) {
        match self {
            Undo::Linked(undo) => {
                capture_linked(undo, data, scratch, runs);
                undo.free();
            }
            Undo::Inline(undo) => {
                // Sorting the entries once by offset makes the runs come out sorted too.
                let images = &mut scratch.images;
                images.clear();
                images.extend(undo.entry_positions());
                // By offset, and among ranges at one offset in declaration order (a later
                // entry lies further into the log): a range declared again with the same
                // length adds nothing, since the first image holds the true old bytes, so
                // repeats are dropped and the txn stays on the fast path (a script declares
                // the same header words many times).
                sort_small_by_key(images, |&(offset, _, start)| (offset, start));
                images.dedup_by(|later, first| later.0 == first.0 && later.1 == first.1);
                let overlapping = images
                    .windows(2)
                    .any(|pair| pair[0].0 + pair[0].1 > pair[1].0);
                if overlapping {
                    capture_overlapping(undo.entries().collect(), data, runs);
                } else {
                    for &(offset, len, start) in images.iter() {
                        let old = &undo.log[start..start + len];
                        diff_words(offset, &data[offset..offset + len], old, runs);
                    }
                }
                // The paper's "move the log pointer back": the capacity stays for the next txn.
                undo.log.clear();
            }
            Undo::MirrorCopy(undo) => {
                let spans = merge_spans(&undo.ranges, &mut scratch.spans);
                let mirror = undo.mirror.bytes_mut();
                for &(offset, len) in spans.iter() {
                    let end = offset + len;
                    diff_words(offset, &data[offset..end], &mirror[offset..end], runs);
                    mirror[offset..end].copy_from_slice(&data[offset..end]);
                }
                undo.ranges.clear();
            }
            Undo::MirrorDiff(undo) => {
                let spans = merge_spans(&undo.ranges, &mut scratch.spans);
                let mirror = undo.mirror.bytes_mut();
                for &(offset, len) in spans.iter() {
                    let first_new = runs.len();
                    let end = offset + len;
                    diff_words(offset, &data[offset..end], &mirror[offset..end], runs);
                    // Only the words found different are written to the mirror.
                    for run in &runs[first_new..] {
                        let (start, stop) = (run.offset as usize, run.end() as usize);
                        mirror[start..stop].copy_from_slice(&data[start..stop]);
                    }
                }
                undo.ranges.clear();
            }
        }
        debug_assert!(self.is_empty());
    }

    /// Keeps a mirror equal to the segment when a redo record is applied from outside a txn.
    pub(crate) fn after_apply(&mut self, offset: usize, bytes: &[u8]) {
        debug_assert!(self.is_empty());
        if let Undo::MirrorCopy(undo) | Undo::MirrorDiff(undo) = self {
            undo.mirror.bytes_mut()[offset..offset + bytes.len()].copy_from_slice(bytes);
        }
    }

    /// V3's undo log as it stands (`[offset u64][len u64][old bytes]` per entry, in declaration
    /// order); `None` for the other strategies. The passive trace ships it before commit clears it.
    pub(crate) fn inline_log(&self) -> Option<&[u8]> {
        match self {
            Undo::Inline(undo) => Some(&undo.log),
            _ => None,
        }
    }

    /// V1's and V2's declared ranges as (offset, len), in declaration order; `None` for the
    /// other strategies. The passive trace reads them before commit clears them.
    pub(crate) fn declared_ranges(&self) -> Option<&[(usize, usize)]> {
        match self {
            Undo::MirrorCopy(undo) | Undo::MirrorDiff(undo) => Some(&undo.ranges),
            _ => None,
        }
    }

    /// The mirror's bytes, for strategies that keep one.
    #[cfg(test)]
    pub(crate) fn mirror(&self) -> Option<&[u8]> {
        match self {
            Undo::MirrorCopy(undo) | Undo::MirrorDiff(undo) => Some(undo.mirror.bytes()),
            _ => None,
        }
    }
}

impl MirrorUndo {
    fn new(segment_len: usize) -> std::io::Result<MirrorUndo> {
        // A fresh segment is all zeros, and so is a fresh anonymous mirror.
        Ok(MirrorUndo {
            mirror: Region::anonymous(segment_len)?,
            ranges: Vec::new(),
        })
    }
}

/// Sorts declared ranges and merges those that overlap or touch, into `spans`.
pub(crate) fn merge_spans<'s>(
    ranges: &[(usize, usize)],
    spans: &'s mut Vec<(usize, usize)>,
) -> &'s [(usize, usize)] {
    spans.clear();
    spans.extend_from_slice(ranges);
    sort_small_by_key(spans, |&(offset, _)| offset);
    let mut write = 0usize;
    for read in 0..spans.len() {
        let (offset, len) = spans[read];
        if write > 0 && spans[write - 1].0 + spans[write - 1].1 >= offset {
            let merged = &mut spans[write - 1];
            merged.1 = merged.1.max(offset + len - merged.0);
        } else {
            spans[write] = (offset, len);
            write += 1;
        }
    }
    spans.truncate(write);
    spans
}

/// Diffs each declared range of V0 against its undo image.
///
/// Where two declared ranges overlap, a byte's true old value is in the image of the range
/// declared first: a later image may already hold the txn's own writes. The common case has no
/// overlap and diffs every range directly.
fn capture_linked(undo: &LinkedUndo, data: &[u8], scratch: &mut Scratch, runs: &mut Vec<Run>) {
    let spans = &mut scratch.spans;
    spans.clear();
    spans.extend(undo.entries().map(|(offset, old)| (offset, old.len())));
    sort_small_by_key(spans, |&(offset, _)| offset);
    let overlapping = spans
        .windows(2)
        .any(|pair| pair[0].0 + pair[0].1 > pair[1].0);
    if overlapping {
        let mut in_declaration_order: Vec<(usize, &[u8])> = undo.entries().collect();
        in_declaration_order.reverse();
        capture_overlapping(in_declaration_order, data, runs);
    } else {
        // The list is newest first, so the runs come out in declaration order, not offset order.
        for (offset, old) in undo.entries() {
            diff_words(offset, &data[offset..offset + old.len()], old, runs);
        }
        normalize_runs(runs);
    }
}

/// Diffs overlapping declared ranges, given in declaration order, against their images: each
/// byte is claimed by the first range that declared it and compared with that range's image.
fn capture_overlapping(
    in_declaration_order: Vec<(usize, &[u8])>,
    data: &[u8],
    runs: &mut Vec<Run>,
) {
    // Claimed byte intervals, start to end, disjoint and not touching. A map keeps each
    // range's work logarithmic: a txn of many small overlapping declarations (an allocator
    // header declared once per freed block) stays O(k log k), not O(k²).
    let mut claimed: std::collections::BTreeMap<usize, usize> = std::collections::BTreeMap::new();
    let mut absorbed: Vec<usize> = Vec::new();
    for (offset, old) in in_declaration_order {
        let end = offset + old.len();
        // The first interval that may overlap or touch: the last one starting at or before
        // the range, if it reaches it.
        let first = match claimed.range(..=offset).next_back() {
            Some((&start, &stop)) if stop >= offset => start,
            _ => offset,
        };
        let (mut merged_start, mut merged_end) = (offset, end);
        let mut cursor = offset;
        absorbed.clear();
        for (&start, &stop) in claimed.range(first..) {
            if start > end {
                break;
            }
            // The bytes before this interval are the new range's to claim.
            if start > cursor {
                let gap_end = start.min(end);
                let image = &old[cursor - offset..gap_end - offset];
                diff_words(cursor, &data[cursor..gap_end], image, runs);
                cursor = gap_end;
            }
            if start < end {
                cursor = cursor.max(stop.min(end));
            }
            merged_start = merged_start.min(start);
            merged_end = merged_end.max(stop);
            absorbed.push(start);
        }
        if cursor < end {
            diff_words(cursor, &data[cursor..end], &old[cursor - offset..], runs);
        }
        for start in &absorbed {
            claimed.remove(start);
        }
        claimed.insert(merged_start, merged_end);
    }
    normalize_runs(runs);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategy_names_round_trip_and_bad_names_list_the_accepted_ones() {
        for strategy in Strategy::ALL {
            assert_eq!(strategy.name().parse::<Strategy>(), Ok(strategy));
        }
        assert_eq!("V3".parse::<Strategy>(), Ok(Strategy::V3InlineLog));
        let err = "v9".parse::<Strategy>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown logging strategy 'v9'; accepted values: v0, v1, v2, v3"
        );
    }

    #[test]
    fn merge_spans_merges_overlapping_and_touching_ranges() {
        let mut spans = Vec::new();
        let merged = merge_spans(&[(10, 5), (0, 4), (4, 2), (12, 10), (30, 1)], &mut spans);
        assert_eq!(merged, &[(0, 6), (10, 12), (30, 1)]);
    }

    #[test]
    fn inline_log_entries_read_back_in_declaration_order() {
        let data: Vec<u8> = (0..64).collect();
        let mut undo = Undo::new(Strategy::V3InlineLog, 4096).unwrap();
        undo.declare(&data, 3, 5);
        undo.declare(&data, 40, 9);
        let Undo::Inline(inline) = &undo else {
            unreachable!()
        };
        assert_eq!(inline.log.len(), 16 + 5 + 16 + 9);
        let entries: Vec<(usize, Vec<u8>)> =
            inline.entries().map(|(o, b)| (o, b.to_vec())).collect();
        assert_eq!(
            entries,
            vec![(3, data[3..8].to_vec()), (40, data[40..49].to_vec())]
        );
    }
}
