//! The log's entries — sealed batches and the chunks of state-transfer images — and the one rule
//! by which an entry continues the log, shared by the writer (where breaking it is a caller's
//! bug, a panic) and recovery (where it ends the log: the successor check).

use std::sync::Arc;

use tandem_redo::SealedBatch;

/// One chunk of a state-transfer image: the pages changed after `lsn_from`, as they stood at
/// `lsn`, split into `count` chunks sent in order. A member that installs a whole image has the
/// history up to `lsn` without the records `lsn_from + 1..=lsn`, so the log stores the image
/// instead of those records and stays one contiguous history.
///
/// Invariants (checked on every append and by recovery's decoder): `lsn_from <= lsn`,
/// `lsn >= 1`, `count >= 1`, `index < count`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageChunk {
    pub lsn_from: u64,
    pub lsn: u64,
    /// The view the image was transferred in: the history its pages at `lsn` belong to,
    /// which a restart that rebuilds them reports (an older view's history may disagree
    /// with them below `lsn`).
    pub view: u64,
    pub index: u32,
    pub count: u32,
    /// Replication's transfer chunk bytes (`[page u32][version u64][4096 bytes]` entries). The
    /// log stores and checksums them and never looks inside.
    pub pages: Arc<[u8]>,
}

impl ImageChunk {
    /// Whether this chunk completes its image.
    pub fn is_last(&self) -> bool {
        self.index + 1 == self.count
    }

    pub(crate) fn assert_valid(&self) {
        assert!(
            self.lsn_from <= self.lsn,
            "an image's lsn_from is at most its lsn"
        );
        assert!(
            self.lsn >= 1,
            "an image stands at an LSN, and LSNs start at 1"
        );
        assert!(self.count >= 1, "an image has at least one chunk");
        assert!(
            self.index < self.count,
            "a chunk's index is below its image's count"
        );
    }
}

/// One entry of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Batch(SealedBatch),
    Image(ImageChunk),
}

impl Entry {
    /// The LSN the log reaches with this entry: a batch's last record, or an image's `lsn`
    /// (reached only once its last chunk is in the log).
    pub fn lsn_last(&self) -> u64 {
        match self {
            Entry::Batch(batch) => batch.lsn_last(),
            Entry::Image(chunk) => chunk.lsn,
        }
    }

    pub fn as_batch(&self) -> Option<&SealedBatch> {
        match self {
            Entry::Batch(batch) => Some(batch),
            Entry::Image(_) => None,
        }
    }

    pub fn as_image(&self) -> Option<&ImageChunk> {
        match self {
            Entry::Batch(_) => None,
            Entry::Image(chunk) => Some(chunk),
        }
    }
}

/// The image whose chunks are arriving: the log's LSN has not reached its `lsn` yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ImageOpen {
    pub lsn_from: u64,
    pub lsn: u64,
    pub view: u64,
    pub count: u32,
    pub index_next: u32,
}

/// Where the log stands, which is all that decides whether an entry continues it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Position {
    /// The LSN of the log's last complete entry; `None` for a log that holds none.
    pub lsn_last: Option<u64>,
    /// An image begun and not finished.
    pub image_open: Option<ImageOpen>,
}

/// Why an entry does not continue the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Discontinuity {
    /// A batch whose first LSN is not the one after the log's last.
    Lsn { lsn_expected: u64, lsn_found: u64 },
    /// An image chunk out of place, or a batch inside an unfinished image.
    Image(&'static str),
}

impl Position {
    /// The LSN of the last complete entry, 0 for a log without one.
    pub fn lsn(&self) -> u64 {
        self.lsn_last.unwrap_or(0)
    }

    /// Whether `entry` continues the log: a batch follows the last LSN (never inside an
    /// unfinished image); an image's first chunk covers the log's end (`lsn_from <= lsn_last`)
    /// and moves it forward (`lsn > lsn_last`); every later chunk is the next one of the
    /// unfinished image, with the same `lsn_from`, `lsn`, `view` and `count`. A log that holds nothing
    /// takes any batch or any image's first chunk: a checkpoint or a rewind may have left it
    /// empty at any LSN.
    pub fn check(&self, entry: &Entry) -> Result<(), Discontinuity> {
        match (entry, self.image_open) {
            (Entry::Batch(_), Some(_)) => Err(Discontinuity::Image(
                "a batch inside an image whose last chunk is missing",
            )),
            (Entry::Batch(batch), None) => match self.lsn_last {
                Some(lsn_last) if batch.lsn_base() != lsn_last + 1 => Err(Discontinuity::Lsn {
                    lsn_expected: lsn_last + 1,
                    lsn_found: batch.lsn_base(),
                }),
                _ => Ok(()),
            },
            (Entry::Image(chunk), Some(open)) => {
                let same = (chunk.lsn_from, chunk.lsn, chunk.view, chunk.count)
                    == (open.lsn_from, open.lsn, open.view, open.count);
                if same && chunk.index == open.index_next {
                    Ok(())
                } else {
                    Err(Discontinuity::Image(
                        "a chunk that is not the next one of the unfinished image",
                    ))
                }
            }
            (Entry::Image(chunk), None) => {
                if chunk.index != 0 {
                    return Err(Discontinuity::Image(
                        "a chunk after the first of an image that has not begun",
                    ));
                }
                match self.lsn_last {
                    Some(lsn_last) if chunk.lsn_from > lsn_last => Err(Discontinuity::Image(
                        "an image of the pages changed after an LSN the log does not reach",
                    )),
                    Some(lsn_last) if chunk.lsn <= lsn_last => Err(Discontinuity::Image(
                        "an image that does not move the log forward",
                    )),
                    _ => Ok(()),
                }
            }
        }
    }

    /// Moves past `entry`, which the caller has checked (or, with the successor check
    /// planted away, not).
    pub fn advance(&mut self, entry: &Entry) {
        match entry {
            Entry::Batch(batch) => {
                self.lsn_last = Some(batch.lsn_last());
                self.image_open = None;
            }
            Entry::Image(chunk) if chunk.is_last() => {
                self.lsn_last = Some(chunk.lsn);
                self.image_open = None;
            }
            Entry::Image(chunk) => {
                self.image_open = Some(ImageOpen {
                    lsn_from: chunk.lsn_from,
                    lsn: chunk.lsn,
                    view: chunk.view,
                    count: chunk.count,
                    index_next: chunk.index + 1,
                });
            }
        }
    }
}
