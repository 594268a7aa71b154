//! Redo records: what one committed txn changed, as sorted runs of new bytes.
//!
//! A record is produced by [`crate::Txn::commit`] from a word-granular comparison of the declared
//! ranges against their undo image, and consumed by [`crate::Segment::apply_redo`] on another
//! segment. Runs are sorted by offset, non-empty and disjoint; the capture also coalesces
//! adjacent runs, so two runs of a captured record never touch.

use crate::WORD_SIZE;

/// A contiguous stretch of changed bytes in a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Run {
    /// Segment offset of the first changed byte.
    pub offset: u64,
    /// Number of changed bytes; never zero in a valid record.
    pub len: u64,
}

impl Run {
    /// Offset one past the last byte of the run.
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// Why a redo record was refused. Nothing of a refused record is ever applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedoError {
    #[error("run {index} is empty; every run must carry at least one byte")]
    EmptyRun { index: usize },
    #[error(
        "run {index} starts at offset {offset}, before the end {end_previous} of the run before \
         it; runs must be sorted by offset and disjoint"
    )]
    Unsorted {
        index: usize,
        offset: u64,
        end_previous: u64,
    },
    #[error("run {index} at offset {offset} is {len} bytes long and overflows a 64-bit offset")]
    Overflow { index: usize, offset: u64, len: u64 },
    #[error("the runs cover {runs_len} bytes but the record carries {data_len} bytes of data")]
    DataLength { runs_len: u64, data_len: u64 },
    #[error("run at offset {offset} of {len} bytes ends past the segment's {segment_len} bytes")]
    OutOfBounds {
        offset: u64,
        len: u64,
        segment_len: u64,
    },
    #[error("the record has LSN {got} but the segment expects LSN {expected} next")]
    LsnGap { expected: u64, got: u64 },
}

/// What one committed txn changed: its LSN and the new bytes of every changed run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedoRecord {
    lsn: u64,
    runs: Vec<Run>,
    /// The new bytes of all runs, concatenated in run order.
    data: Vec<u8>,
}

impl RedoRecord {
    /// Builds a record from its parts, checking the shape every record must have.
    pub fn from_parts(lsn: u64, runs: Vec<Run>, data: Vec<u8>) -> Result<RedoRecord, RedoError> {
        let record = RedoRecord { lsn, runs, data };
        record.validate_shape()?;
        Ok(record)
    }

    /// An empty record for `lsn`, to be filled with [`RedoRecord::push_run`].
    pub fn empty(lsn: u64) -> RedoRecord {
        RedoRecord {
            lsn,
            runs: Vec::new(),
            data: Vec::new(),
        }
    }

    /// Empties the record and gives it a new LSN, keeping its buffers for reuse.
    #[inline]
    pub fn reset(&mut self, lsn: u64) {
        self.lsn = lsn;
        self.runs.clear();
        self.data.clear();
    }

    /// Appends a run; it must start after the previous run ends and must not be empty.
    pub fn push_run(&mut self, offset: u64, bytes: &[u8]) -> Result<(), RedoError> {
        let index = self.runs.len();
        let len = bytes.len() as u64;
        if len == 0 {
            return Err(RedoError::EmptyRun { index });
        }
        if offset.checked_add(len).is_none() {
            return Err(RedoError::Overflow { index, offset, len });
        }
        if let Some(previous) = self.runs.last()
            && offset < previous.end()
        {
            return Err(RedoError::Unsorted {
                index,
                offset,
                end_previous: previous.end(),
            });
        }
        self.runs.push(Run { offset, len });
        extend_small(&mut self.data, bytes);
        Ok(())
    }

    pub fn lsn(&self) -> u64 {
        self.lsn
    }

    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// The new bytes of all runs, concatenated in run order.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Each run with its new bytes, in offset order.
    pub fn iter(&self) -> impl Iterator<Item = (Run, &[u8])> + '_ {
        let mut data_pos = 0usize;
        self.runs.iter().map(move |run| {
            let len = usize::try_from(run.len).expect("run length fits in memory");
            let bytes = &self.data[data_pos..data_pos + len];
            data_pos += len;
            (*run, bytes)
        })
    }

    /// Checks that runs are non-empty, sorted, disjoint, and exactly cover the data.
    pub fn validate_shape(&self) -> Result<(), RedoError> {
        let mut end_previous = 0u64;
        let mut runs_len = 0u64;
        for (index, run) in self.runs.iter().enumerate() {
            if run.len == 0 {
                return Err(RedoError::EmptyRun { index });
            }
            let Some(end) = run.offset.checked_add(run.len) else {
                return Err(RedoError::Overflow {
                    index,
                    offset: run.offset,
                    len: run.len,
                });
            };
            if index > 0 && run.offset < end_previous {
                return Err(RedoError::Unsorted {
                    index,
                    offset: run.offset,
                    end_previous,
                });
            }
            end_previous = end;
            runs_len = runs_len.saturating_add(run.len);
        }
        let data_len = self.data.len() as u64;
        if runs_len != data_len {
            return Err(RedoError::DataLength { runs_len, data_len });
        }
        Ok(())
    }

    /// Checks that every run lies inside a segment of `segment_len` bytes.
    pub fn validate_bounds(&self, segment_len: u64) -> Result<(), RedoError> {
        // Runs are sorted and disjoint, so checking the last one is enough once the shape holds.
        self.validate_shape()?;
        match self.runs.last() {
            Some(run) if run.end() > segment_len => Err(RedoError::OutOfBounds {
                offset: run.offset,
                len: run.len,
                segment_len,
            }),
            _ => Ok(()),
        }
    }

    pub(crate) fn runs_mut(&mut self) -> &mut Vec<Run> {
        &mut self.runs
    }

    /// Copies the bytes of every run from `source` (the committed segment) into the data.
    #[inline]
    pub(crate) fn fill_data(&mut self, source: &[u8]) {
        debug_assert!(self.data.is_empty());
        for run in &self.runs {
            extend_small(
                &mut self.data,
                &source[run.offset as usize..run.end() as usize],
            );
        }
    }
}

/// Appends to `runs` the word-aligned stretches where `current` differs from `old`.
///
/// Both slices hold the segment bytes starting at offset `base`. Words are aligned to absolute
/// segment offsets, so the first and last word of a range may be partial. A changed word that
/// starts where the last run in `runs` ends extends that run.
#[inline(always)]
pub(crate) fn diff_words(base: usize, current: &[u8], old: &[u8], runs: &mut Vec<Run>) {
    assert_eq!(
        current.len(),
        old.len(),
        "a range and its undo image differ in length"
    );
    let len = current.len();
    if base % WORD_SIZE + len <= WORD_SIZE {
        // The common case for a single field: the range lies inside one word.
        if differ(current, old) {
            push_changed(runs, base, len);
        }
        return;
    }
    let head_len = (WORD_SIZE - base % WORD_SIZE) % WORD_SIZE;
    if head_len > 0 && differ(&current[..head_len], &old[..head_len]) {
        push_changed(runs, base, head_len);
    }
    let mut position = head_len;
    while position + WORD_SIZE <= len {
        let word_current = word_at(current, position);
        if word_current != word_at(old, position) {
            push_changed(runs, base + position, WORD_SIZE);
        }
        position += WORD_SIZE;
    }
    if position < len && differ(&current[position..], &old[position..]) {
        push_changed(runs, base + position, len - position);
    }
}

/// Appends `bytes` to `out`. Record fields are mostly 4, 8 or 16 bytes; appending those with
/// a length known at compile time becomes a plain move instead of a call to memcpy.
#[inline(always)]
pub fn extend_small(out: &mut Vec<u8>, bytes: &[u8]) {
    match bytes.len() {
        4 => out.extend_from_slice(&bytes[..4]),
        8 => out.extend_from_slice(&bytes[..8]),
        16 => out.extend_from_slice(&bytes[..16]),
        _ => out.extend_from_slice(bytes),
    }
}

/// Copies `src` into `dst` (same length), as a plain move for the common 4, 8 and 16 bytes.
#[inline(always)]
pub(crate) fn copy_small(dst: &mut [u8], src: &[u8]) {
    match src.len() {
        4 => dst[..4].copy_from_slice(&src[..4]),
        8 => dst[..8].copy_from_slice(&src[..8]),
        16 => dst[..16].copy_from_slice(&src[..16]),
        _ => dst.copy_from_slice(src),
    }
}

#[inline(always)]
fn word_at(bytes: &[u8], position: usize) -> u64 {
    let word: [u8; WORD_SIZE] = bytes[position..position + WORD_SIZE]
        .try_into()
        .expect("a word");
    u64::from_ne_bytes(word)
}

/// Whether two slices of at most a word differ; an inline loop beats a call to memcmp here.
#[inline(always)]
fn differ(a: &[u8], b: &[u8]) -> bool {
    debug_assert!(a.len() <= WORD_SIZE);
    debug_assert_eq!(a.len(), b.len());
    if a.len() == 4 {
        return a[..4] != b[..4];
    }
    let mut different = 0u8;
    for (x, y) in a.iter().zip(b) {
        different |= x ^ y;
    }
    different != 0
}

#[inline(always)]
fn push_changed(runs: &mut Vec<Run>, offset: usize, len: usize) {
    let offset = offset as u64;
    let len = len as u64;
    match runs.last_mut() {
        Some(last) if last.end() == offset => last.len += len,
        _ => runs.push(Run { offset, len }),
    }
}

/// Sorts a short slice by key with insertion sort: txns declare a handful of ranges, where
/// this beats the general sort's setup.
#[inline]
pub(crate) fn sort_small_by_key<T: Copy, K: Ord>(items: &mut [T], key: impl Fn(&T) -> K) {
    if items.len() > 32 {
        items.sort_unstable_by_key(key);
        return;
    }
    for index in 1..items.len() {
        let item = items[index];
        let item_key = key(&item);
        let mut hole = index;
        while hole > 0 && key(&items[hole - 1]) > item_key {
            items[hole] = items[hole - 1];
            hole -= 1;
        }
        items[hole] = item;
    }
}

/// Sorts runs by offset and merges the ones that touch or overlap.
#[inline]
pub(crate) fn normalize_runs(runs: &mut Vec<Run>) {
    if !runs.is_sorted_by_key(|run| run.offset) {
        sort_small_by_key(runs, |run| run.offset);
    }
    let mut write = 0usize;
    for read in 0..runs.len() {
        let run = runs[read];
        if write > 0 && runs[write - 1].end() >= run.offset {
            let merged = &mut runs[write - 1];
            merged.len = merged.len.max(run.end() - merged.offset);
        } else {
            runs[write] = run;
            write += 1;
        }
    }
    runs.truncate(write);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(base: usize, current: &[u8], old: &[u8]) -> Vec<Run> {
        let mut runs = Vec::new();
        diff_words(base, current, old, &mut runs);
        runs
    }

    #[test]
    fn unchanged_range_gives_no_run() {
        assert!(diff(3, &[1, 2, 3], &[1, 2, 3]).is_empty());
    }

    #[test]
    fn changed_bytes_widen_to_their_aligned_word() {
        let old = [0u8; 24];
        let mut current = old;
        current[9] = 1; // word [8, 16)
        assert_eq!(diff(0, &current, &old), vec![Run { offset: 8, len: 8 }]);
    }

    #[test]
    fn partial_head_and_tail_words_are_clipped_to_the_range() {
        // The range [5, 21) has a head word [5, 8), a body word [8, 16) and a tail [16, 21).
        let old = [0u8; 16];
        let mut current = old;
        current[0] = 1;
        current[15] = 1;
        assert_eq!(
            diff(5, &current, &old),
            vec![Run { offset: 5, len: 3 }, Run { offset: 16, len: 5 }]
        );
    }

    #[test]
    fn adjacent_changed_words_coalesce() {
        let old = [0u8; 32];
        let current = [9u8; 32];
        assert_eq!(
            diff(64, &current, &old),
            vec![Run {
                offset: 64,
                len: 32
            }]
        );
    }

    #[test]
    fn small_sort_sorts() {
        let mut items = [5, 3, 9, 1, 1, 7];
        sort_small_by_key(&mut items, |&x| x);
        assert_eq!(items, [1, 1, 3, 5, 7, 9]);
        let mut many: Vec<u32> = (0..100).rev().collect();
        sort_small_by_key(&mut many, |&x| x);
        assert!(many.is_sorted());
    }

    #[test]
    fn normalize_sorts_and_merges_touching_runs() {
        let mut runs = vec![
            Run { offset: 16, len: 8 },
            Run { offset: 0, len: 4 },
            Run { offset: 4, len: 4 },
            Run { offset: 20, len: 8 },
        ];
        normalize_runs(&mut runs);
        assert_eq!(
            runs,
            vec![
                Run { offset: 0, len: 8 },
                Run {
                    offset: 16,
                    len: 12
                }
            ]
        );
    }

    #[test]
    fn push_run_rejects_unsorted_and_empty_runs() {
        let mut record = RedoRecord::empty(1);
        record.push_run(8, &[1, 2]).unwrap();
        assert_eq!(
            record.push_run(9, &[3]),
            Err(RedoError::Unsorted {
                index: 1,
                offset: 9,
                end_previous: 10
            })
        );
        assert_eq!(
            record.push_run(20, &[]),
            Err(RedoError::EmptyRun { index: 1 })
        );
        assert_eq!(record.runs().len(), 1);
    }

    #[test]
    fn from_parts_checks_data_length_and_bounds() {
        let runs = vec![Run {
            offset: 4090,
            len: 8,
        }];
        assert_eq!(
            RedoRecord::from_parts(1, runs.clone(), vec![0; 7]),
            Err(RedoError::DataLength {
                runs_len: 8,
                data_len: 7
            })
        );
        let record = RedoRecord::from_parts(1, runs, vec![0; 8]).unwrap();
        assert_eq!(
            record.validate_bounds(4096),
            Err(RedoError::OutOfBounds {
                offset: 4090,
                len: 8,
                segment_len: 4096
            })
        );
        assert_eq!(record.validate_bounds(8192), Ok(()));
    }
}
