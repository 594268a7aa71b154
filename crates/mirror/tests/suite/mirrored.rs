//! A primary and its backup in one process, and the one checker the mirroring tests share:
//! the backup's memory against the primary's, saved byte for byte at each checkpoint.

use tandem_mirror::{
    Ack, Checkpoint, Checkpointer, Frame, FrameReader, Mirror, PlantedMirrorBug, TrackerKind,
    hash_memory,
};

use crate::common;

/// The primary: a checkpointer over a tracked region, and its memory as each checkpoint took it.
pub struct Primary {
    pub checkpointer: Checkpointer,
    /// `saved[n]`: the region when checkpoint `n` was taken; `saved[0]`, zeroed, is where a
    /// backup starts.
    pub saved: Vec<Vec<u8>>,
}

impl Primary {
    pub fn new(kind: TrackerKind, pages: usize) -> Primary {
        let tracker = common::make(kind, pages).expect("a granted kind");
        let zeroed = vec![0; tracker.region().len()];
        Primary {
            checkpointer: Checkpointer::new(tracker),
            saved: vec![zeroed],
        }
    }

    pub fn page_size(&self) -> usize {
        self.checkpointer.region().page_size()
    }

    pub fn store(&mut self, offset: usize, byte: u8) {
        self.checkpointer.region_mut().as_mut_slice()[offset] = byte;
    }

    /// Takes the next checkpoint and saves the region as it took it. The hash its `End` frame
    /// carries must be the region's, hashed from scratch: a page the tracker missed shows here.
    pub fn take(&mut self) -> Result<Checkpoint, String> {
        let checkpoint = self.checkpointer.checkpoint().expect("a checkpoint");
        let region = self.checkpointer.region();
        let memory = region.as_slice().to_vec();
        let hash = checkpoint.hash();
        let hash_region = hash_memory(&memory, region.page_size());
        if hash != hash_region {
            return Err(format!(
                "{} tracker, checkpoint {}: End says {hash:#x}, the region hashes to \
                 {hash_region:#x} (a page written and not shipped)",
                self.checkpointer.tracker().kind(),
                checkpoint.number()
            ));
        }
        self.saved.push(memory);
        assert_eq!(self.saved.len() as u64, checkpoint.number() + 1);
        Ok(checkpoint)
    }
}

/// A backup of `pages` pages, with `bug` planted if any.
pub fn new_mirror(pages: usize, bug: Option<PlantedMirrorBug>) -> Mirror {
    let mut mirror = Mirror::new(pages).expect("map the mirror's memory");
    if let Some(bug) = bug {
        mirror.plant(bug);
    }
    mirror
}

/// Sends `frames` to `mirror` through the codec, as a new connection would (a reader from the
/// mirror's last complete checkpoint), and returns the acks it answered with.
pub fn deliver(mirror: &mut Mirror, frames: &[Frame<'_>]) -> Result<Vec<Ack>, String> {
    let mut bytes = Vec::new();
    for frame in frames {
        frame.encode(&mut bytes);
    }
    let mut reader = FrameReader::to_backup(mirror.limits(), mirror.last_complete());
    let mut acks = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let (frame, len) = reader
            .read(&bytes[at..])
            .map_err(|error| format!("the reader refused a frame: {error}"))?;
        at += len;
        let ack = mirror
            .step(&frame)
            .map_err(|error| format!("the mirror refused {frame:?}: {error}"))?;
        acks.extend(ack);
    }
    Ok(acks)
}

/// The pages where `a` and `b` differ.
pub fn pages_differing(a: &[u8], b: &[u8], page_size: usize) -> Vec<usize> {
    assert_eq!(a.len(), b.len(), "memories of one size");
    a.chunks(page_size)
        .zip(b.chunks(page_size))
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(index, _)| index)
        .collect()
}

/// Requires the mirror to hold checkpoint `n` exactly: complete through `n`, none open, its
/// memory's hash the primary's at `n` and its bytes equal to them. Says what it holds
/// otherwise, `when` first.
pub fn expect_at(mirror: &Mirror, saved: &[Vec<u8>], n: u64, when: &str) -> Result<(), String> {
    let page_size = tandem_mirror::page_size();
    if mirror.last_complete() != n || mirror.open().is_some() {
        return Err(format!(
            "{when}: the mirror is complete through {} with {:?} open, not at {n}",
            mirror.last_complete(),
            mirror.open()
        ));
    }
    let memory = mirror.memory();
    let expected = &saved[n as usize];
    let (hash_mirror, hash_primary) = (
        hash_memory(memory, page_size),
        hash_memory(expected, page_size),
    );
    let differing = pages_differing(memory, expected, page_size);
    if hash_mirror != hash_primary || !differing.is_empty() {
        let equal_to: Vec<usize> = (0..saved.len()).filter(|&m| saved[m] == memory).collect();
        return Err(format!(
            "{when}: the mirror's memory is not checkpoint {n}'s (hash {hash_mirror:#x}, the \
             primary's {hash_primary:#x}): pages {differing:?} differ; it equals the \
             checkpoints {equal_to:?}"
        ));
    }
    if mirror.hash() != hash_mirror {
        return Err(format!(
            "{when}: the mirror's own hash {:#x} is not its memory's {hash_mirror:#x}",
            mirror.hash()
        ));
    }
    Ok(())
}

/// `frames` with page frame `which` (counted among the `Page`s) sent twice: first with
/// intermediate bytes (the final ones xor `xor`), then as it was, and `Begin` announcing the
/// extra frame. A primary that ships a page early and again at the checkpoint sends this.
/// `None` when no page frame can be added (the checkpoint ships as many as the memory has).
pub fn with_page_twice<'a>(
    frames: &[Frame<'a>],
    which: usize,
    xor: u8,
    pages: usize,
) -> Option<Vec<Frame<'a>>> {
    assert_ne!(xor, 0, "intermediate bytes differ from the final ones");
    let Some(Frame::Begin {
        checkpoint,
        pages: announced,
        page_size,
    }) = frames.first().cloned()
    else {
        panic!("a checkpoint starts with Begin");
    };
    if announced == 0 || announced as usize >= pages {
        return None;
    }
    let at = 1 + which % announced as usize;
    let Frame::Page { index, bytes, .. } = &frames[at] else {
        panic!("Page frames follow Begin");
    };
    let intermediate = Frame::Page {
        checkpoint,
        index: *index,
        bytes: bytes
            .iter()
            .map(|byte| byte ^ xor)
            .collect::<Vec<u8>>()
            .into(),
    };
    let mut twice = frames.to_vec();
    twice[0] = Frame::Begin {
        checkpoint,
        pages: announced + 1,
        page_size,
    };
    twice.insert(at, intermediate);
    Some(twice)
}
