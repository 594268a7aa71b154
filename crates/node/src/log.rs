//! A node's write-ahead log, as its roles see it: what each role hands the log, when the log
//! syncs, and what a sync is worth to the primary.
//!
//! Every member appends the records it holds (the primary the batches it seals, a backup the
//! batches it accepts and the state transfers it installs) to one log that outlives its roles
//! (crates/wal stores it). The driver (the runtime's log thread, the simulator's disk) carries
//! out the [`LogOrder`]s in the order given and syncs when [`SyncPolicy::due`] says; what it
//! synced goes back to the primary role (`Primary::log_synced`) or, on a backup, to the
//! primary as a `Message::durable_ack`. The `durable` rule releases a reply once the primary and k
//! backups synced its record.

use std::fmt;
use std::str::FromStr;

use std::path::Path;
use std::sync::Arc;

use tandem_memory::Segment;
use tandem_redo::SealedBatch;
use tandem_replication::transfer::{PageImage, install_chunks};
use tandem_replication::{Applier, ApplyBatch, ReceiverReady};
use tandem_wal::{
    CheckpointRecovered, Disk, Entry, ImageChunk, Recovered, Wal, WalError, WalOptions,
};

/// What a role hands the log, in the order the log must hold it.
#[derive(Clone, Debug)]
pub enum LogOrder {
    /// A batch the node holds from `lsn_from` on (earlier records of it were held already: a
    /// backup accepted a batch that overlapped what it had).
    Batch { batch: SealedBatch, lsn_from: u64 },
    /// A state transfer installed in view `view`: the segment went from the image's
    /// `lsn_from` to its `lsn` by pages, not records, which follow that view's history.
    Image { image: PageImage, view: u64 },
    /// The node's segment was rewound to `lsn` (a view change discarded the records above
    /// it): the log must end there before anything else is appended.
    Cut { lsn: u64 },
    /// A `durable` reply waits for records up to `lsn`: sync them at once, whatever the
    /// node's own schedule (the primary's own wish, or a backup's `Message::SyncWanted`).
    SyncWanted { lsn: u64 },
    /// A checkpoint begins: an image of the segment as it stood at `lsn` (its records follow
    /// view `view`'s history), in `chunk_count` chunks ([`crate::Checkpointer`]).
    CheckpointBegin {
        lsn: u64,
        view: u64,
        chunk_count: u32,
    },
    /// The next chunk of the checkpoint at `lsn` (page entries, the state-transfer format).
    CheckpointChunk { lsn: u64, chunk: Arc<[u8]> },
    /// The checkpoint at `lsn` is whole: once it is synced, the log drops what it covers.
    CheckpointFinish { lsn: u64 },
    /// The checkpoint under way is given up (its segment was rewound below it).
    CheckpointAbandon,
}

/// What a restarted node rebuilt from its log ([`replay`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    /// The segment's LSN after the replay: every record up to it is the log's.
    pub lsn: u64,
    /// The newest view a replayed batch was sealed in, an installed image was transferred in,
    /// or the checkpoint was taken in (0: none): the view whose history the records follow,
    /// or an older one with no promotion since (a batch keeps the view it was sealed in,
    /// and a primary that stays seals the same history in its later views), which a view
    /// change reads to decide what the node keeps, and a promotion made from the report
    /// takes as its history's base.
    pub view: u64,
    /// Records replayed, and images installed (a checkpoint's not counted).
    pub records: u64,
    pub images: u64,
}

/// Whether what recovery gave back rebuilds a state of the node's history on top of the
/// initial load (at `lsn_load`): a checkpoint (the log kept continues it), a log whose
/// history starts at the load, or a log that gave back nothing (the load itself). Any other
/// log starts past a gap and rebuilds nothing.
pub fn rebuilds_state(recovered: &Recovered, lsn_load: u64) -> bool {
    match recovered.lsn_base() {
        Some(lsn_base) => recovered.checkpoint.is_some() || lsn_base == lsn_load,
        None => true,
    }
}

/// What a restarted node rebuilds on `segment` (which holds the initial load) from what its
/// log `recovered`, if anything ([`rebuilds_state`]); the runtime and the simulator both
/// restart through here.
///
/// A log that gave back nothing (the node never synced a record, or its records were all
/// truncated away) rebuilds the initial load itself. Every view's history starts with the
/// load, so the node holds the history of `view_known` (the newest view its config store
/// knows) up to it, and says so: a whole group that lost power before any record reached a
/// log reports and promotes from there, rather than waiting for good for a node with more.
/// Under `durable` such a report counts like any other, and is no under-report: a member
/// acknowledges only records its anchored log synced, and a synced record stays in the log
/// unless a promotion truncated it or a checkpoint covers it. A log emptied by a view
/// change's cut below its checkpoint (which the cut deletes) is unanchored until its next
/// checkpoint: its node acknowledged nothing since, and what it acknowledged before, the
/// promotion that cut it kept (its truncate LSN is the floor a later promotion must reach,
/// `tandem_cluster::rule::promote_from`).
pub fn rebuild(
    segment: &mut Segment,
    recovered: &Recovered,
    lsn_load: u64,
    view_known: u64,
) -> Result<Option<Replayed>, String> {
    assert_eq!(
        segment.lsn(),
        lsn_load,
        "a restart rebuilds on the initial load"
    );
    if !rebuilds_state(recovered, lsn_load) {
        return Ok(None);
    }
    if recovered.is_empty() {
        return Ok(Some(Replayed {
            lsn: lsn_load,
            view: view_known,
            records: 0,
            images: 0,
        }));
    }
    replay_from(segment, recovered.checkpoint.as_ref(), recovered.replay()).map(Some)
}

/// Replays a log's `entries` (a contiguous history, as `tandem_wal` recovers it, starting
/// at the segment's LSN) onto `segment`: batches are decoded and checked whole, then
/// applied, as a backup's applier does; images are staged chunk by chunk and installed
/// whole. The same code runs when a node restarts in the runtime and in the simulator.
///
/// An entry that does not continue the segment, or does not apply, stops the replay with an
/// error naming it; the segment then holds every entry before it.
pub fn replay(segment: &mut Segment, entries: &[Entry]) -> Result<Replayed, String> {
    replay_from(segment, None, entries)
}

/// [`replay`] after installing `checkpoint` (the pages changed since the initial load, as they
/// stood at its LSN) on `segment`, which holds the initial load; `entries` are the log's
/// entries after the checkpoint (`Recovered::replay`: the first may straddle it, and is
/// trimmed).
pub fn replay_from(
    segment: &mut Segment,
    checkpoint: Option<&CheckpointRecovered>,
    entries: &[Entry],
) -> Result<Replayed, String> {
    let mut replayed = Replayed {
        lsn: segment.lsn(),
        view: 0,
        records: 0,
        images: 0,
    };
    if let Some(checkpoint) = checkpoint {
        let lsn_from = segment.lsn();
        install_chunks(segment, lsn_from, checkpoint.lsn, checkpoint.chunks())
            .map_err(|err| format!("the checkpoint at LSN {}: {err}", checkpoint.lsn))?;
        replayed.lsn = segment.lsn();
        replayed.view = checkpoint.view;
    }
    let mut applier = Applier::new(segment.lsn());
    let mut staged: Vec<Arc<[u8]>> = Vec::new();
    for entry in entries {
        match entry {
            // Records a checkpoint already holds.
            Entry::Batch(batch) if batch.lsn_last() <= segment.lsn() && staged.is_empty() => {}
            Entry::Batch(batch) => {
                if !staged.is_empty() {
                    return Err(format!(
                        "a batch at LSN {} follows an image whose chunks are not all there",
                        batch.lsn_base()
                    ));
                }
                let lsn_next = segment.lsn() + 1;
                if batch.lsn_base() > lsn_next || batch.lsn_last() < lsn_next {
                    return Err(format!(
                        "the batch of LSNs {}..={} does not continue the segment at LSN {}",
                        batch.lsn_base(),
                        batch.lsn_last(),
                        segment.lsn()
                    ));
                }
                let apply = ApplyBatch {
                    batch: batch.clone(),
                    lsn_from: lsn_next,
                };
                let lsn = applier
                    .apply(segment, &apply)
                    .map_err(|err| format!("the batch at LSN {lsn_next}: {err}"))?;
                replayed.records += lsn - lsn_next + 1;
                replayed.view = replayed.view.max(batch.view());
            }
            Entry::Image(chunk) => {
                if chunk.index as usize != staged.len() {
                    return Err(format!(
                        "image chunk {} of {} arrived after {} chunks",
                        chunk.index,
                        chunk.count,
                        staged.len()
                    ));
                }
                staged.push(Arc::clone(&chunk.pages));
                if staged.len() == chunk.count as usize {
                    let image = PageImage {
                        lsn_from: chunk.lsn_from,
                        lsn: chunk.lsn,
                        chunks: std::mem::take(&mut staged),
                    };
                    applier.install(segment, &image).map_err(|err| {
                        format!(
                            "the image of LSNs {}..={}: {err}",
                            image.lsn_from, image.lsn
                        )
                    })?;
                    replayed.images += 1;
                    // Its pages follow the history of the view it was transferred in, which
                    // may disagree below its LSN with the older view of the batches before
                    // it (Redis seed 57157: a node that reported the batches' view was
                    // promoted on a history its pages did not hold, and another member kept a
                    // record that history had discarded).
                    replayed.view = replayed.view.max(chunk.view);
                }
            }
        }
        replayed.lsn = segment.lsn();
    }
    if !staged.is_empty() {
        return Err("the log ends inside an image".into());
    }
    Ok(replayed)
}

/// What [`LogCore::align`] did to make the log end at a role's segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aligned {
    /// The log already ended there (or was empty).
    AsItWas,
    /// Records above the segment's LSN were cut (a view change discarded them).
    Cut { lsn_end_before: u64 },
    /// The log could not end there (it ended below the segment, or a cut fell inside an
    /// image) and starts again, unanchored: it reports nothing durable until a checkpoint
    /// anchors it.
    Restarted { lsn_end_before: u64 },
}

/// A node's write-ahead log with its decisions: what each [`LogOrder`] appends, where the log
/// must end when a role starts ([`LogCore::align`]), when it syncs (the node's
/// [`SyncPolicy`]), and what a sync is worth ([`LogCore::lsn_durable`]). The runtime's log
/// thread runs it on the file system, the simulator on a `SimDisk`.
///
/// **Anchoring.** A synced LSN is worth something only if a restart could rebuild the state
/// it names: the log's history must start at a state the node rebuilds without it, the
/// initial load's LSN (an image from there counts). A log that had to start again past a
/// gap is not anchored, and reports nothing durable until it is again.
#[derive(Debug)]
pub struct LogCore<D: Disk> {
    wal: Wal<D>,
    policy: SyncPolicy,
    /// The LSN of the node's initial load: a history that starts there is rebuilt from it.
    lsn_load: u64,
    anchored: bool,
    /// The highest LSN a `durable` reply waits for ([`LogOrder::SyncWanted`]).
    lsn_sync_wanted: u64,
    /// The LSN of the checkpoint being written, if one is ([`LogOrder::CheckpointBegin`]).
    checkpoint_writing: Option<u64>,
}

impl<D: Disk> LogCore<D> {
    /// Opens (recovering) the log in `dir` on `disk`; with what it recovered.
    pub fn open(
        disk: D,
        dir: &Path,
        options: WalOptions,
        policy: SyncPolicy,
        lsn_load: u64,
    ) -> Result<(LogCore<D>, Recovered), WalError> {
        let (wal, recovered) = Wal::open(disk, dir, options)?;
        // A checkpoint is a state a restart rebuilds, and recovery keeps only a log that
        // continues it.
        let anchored = recovered.lsn_base().is_none() || rebuilds_state(&recovered, lsn_load);
        let core = LogCore {
            wal,
            policy,
            lsn_load,
            anchored,
            lsn_sync_wanted: 0,
            checkpoint_writing: None,
        };
        Ok((core, recovered))
    }

    pub fn policy(&self) -> SyncPolicy {
        self.policy
    }

    /// Why the log takes nothing more (its first I/O error), if it does not.
    pub fn poisoned(&self) -> Option<&str> {
        self.wal.poisoned()
    }

    /// The disk the log lives on (the simulator's `SimDisk` fails a sync through it).
    pub fn disk_mut(&mut self) -> &mut D {
        self.wal.disk_mut()
    }

    /// Gives the disk back (the simulator crashes it, then opens the log again).
    pub fn into_disk(self) -> D {
        self.wal.into_disk()
    }

    /// Every record up to here is synced and a restart could rebuild it (0: nothing): the
    /// log's synced entries, or its newest complete checkpoint when that lies beyond them (a
    /// checkpoint is durable once complete, and the entries it covers may not be: after a
    /// crash that lost them, recovery keeps the checkpoint alone; seed 510937), and at
    /// least the initial load, which an anchored log rebuilds from nothing (a fresh cluster
    /// under `durable` held its first reads until a write made something synced).
    pub fn lsn_durable(&self) -> u64 {
        if self.anchored && self.wal.poisoned().is_none() {
            let checkpoint = self.wal.lsn_checkpoint().unwrap_or(0);
            self.wal.lsn_durable().max(checkpoint).max(self.lsn_load)
        } else {
            0
        }
    }

    /// The last LSN appended (synced or not).
    pub fn lsn_appended(&self) -> u64 {
        self.wal.lsn_appended()
    }

    /// Whether appends wait for a sync.
    pub fn unsynced(&self) -> bool {
        self.wal.lsn_appended() > self.wal.lsn_durable()
    }

    /// How long after `ms_since_sync` (since the last sync) the policy's next sync falls due,
    /// if one will with nothing more appended (`every:MS` with appends waiting); a driver that
    /// waits for orders wakes then.
    pub fn ms_until_sync_due(&self, ms_since_sync: u64) -> Option<u64> {
        match self.policy {
            SyncPolicy::EveryMs(ms) if self.unsynced() => {
                Some(u64::from(ms).saturating_sub(ms_since_sync))
            }
            SyncPolicy::Always | SyncPolicy::EveryMs(_) | SyncPolicy::Never => None,
        }
    }

    /// Whether to sync now, `ms_since_sync` after the last one: a `durable` reply waits for
    /// what is appended, or the policy says so.
    pub fn sync_due(&self, ms_since_sync: u64) -> bool {
        let wanted = self.unsynced() && self.lsn_sync_wanted > self.wal.lsn_durable();
        wanted || self.policy.due(self.unsynced(), ms_since_sync)
    }

    /// Writes and syncs everything appended (group commit: one sync for all of it).
    pub fn sync(&mut self) -> Result<(), WalError> {
        self.wal.sync().map(|_| ())
    }

    /// Writes what was appended to the files without syncing, when no sync is due: a crash
    /// of the process then loses none of it, and the next sync has little left to write.
    pub fn write(&mut self) -> Result<(), WalError> {
        self.wal.write()
    }

    /// Appends what a role hands over. Panics on an order that does not continue the log:
    /// a role must [`LogCore::align`] the log with its segment before it appends.
    pub fn carry_out(&mut self, order: LogOrder) -> Result<(), WalError> {
        match order {
            LogOrder::Batch { batch, lsn_from } => {
                assert!(
                    batch.lsn_base() <= lsn_from && lsn_from <= batch.lsn_last(),
                    "a batch is logged from one of its own records"
                );
                if self.wal.lsn_base().is_none() {
                    // An empty log starts where the role is: anchored if that is the load or
                    // the checkpoint's LSN.
                    self.anchored = self.rebuilds(lsn_from - 1);
                } else {
                    assert_eq!(
                        lsn_from,
                        self.wal.lsn_appended() + 1,
                        "the log is fed in order (a role started without aligning it)"
                    );
                }
                if lsn_from == batch.lsn_base() {
                    self.wal.append(&batch)
                } else {
                    self.wal.append_from(&batch, lsn_from)
                }
            }
            LogOrder::Image { image, view } => {
                if self.wal.lsn_base().is_none() {
                    self.anchored = self.rebuilds(image.lsn_from);
                } else if image.lsn <= self.wal.lsn_appended() {
                    // A rejoining member's transfer to the LSN it was rewound to replaces
                    // the pages its discarded records changed; the log, cut there, already
                    // holds the history that rebuilds them.
                    return Ok(());
                }
                let count = u32::try_from(image.chunks.len()).expect("a transfer's chunk count");
                for (index, pages) in image.chunks.iter().enumerate() {
                    let chunk = ImageChunk {
                        lsn_from: image.lsn_from,
                        lsn: image.lsn,
                        view,
                        index: index as u32,
                        count,
                        pages: Arc::clone(pages),
                    };
                    self.wal.append_chunk(&chunk)?;
                }
                Ok(())
            }
            LogOrder::Cut { lsn } => self.align(lsn).map(|_| ()),
            LogOrder::SyncWanted { lsn } => {
                self.lsn_sync_wanted = self.lsn_sync_wanted.max(lsn);
                Ok(())
            }
            LogOrder::CheckpointBegin {
                lsn,
                view,
                chunk_count,
            } => {
                if self.checkpoint_writing.take().is_some() {
                    self.wal.checkpoint_abandon()?;
                }
                // One at the same LSN as the durable one would add nothing (a role started
                // again with nothing new since): its chunks are dropped.
                if self
                    .wal
                    .lsn_checkpoint()
                    .is_some_and(|durable| lsn <= durable)
                {
                    return Ok(());
                }
                self.wal.checkpoint_begin(lsn, view, chunk_count)?;
                self.checkpoint_writing = Some(lsn);
                Ok(())
            }
            // Orders of a checkpoint given up meanwhile (a role that started aligned the
            // log) are dropped.
            LogOrder::CheckpointChunk { lsn, chunk } if self.checkpoint_writing == Some(lsn) => {
                self.wal.checkpoint_append(&chunk)
            }
            LogOrder::CheckpointFinish { lsn } if self.checkpoint_writing == Some(lsn) => {
                self.checkpoint_writing = None;
                self.wal.checkpoint_finish()?;
                // The log's history continues a synced image now: a restart rebuilds from
                // it, whatever gap the log had before (`Aligned::Restarted`).
                self.anchored = true;
                Ok(())
            }
            LogOrder::CheckpointChunk { .. } | LogOrder::CheckpointFinish { .. } => Ok(()),
            LogOrder::CheckpointAbandon => {
                if self.checkpoint_writing.take().is_some() {
                    self.wal.checkpoint_abandon()?;
                }
                Ok(())
            }
        }
    }

    /// Whether a restart rebuilds the state at `lsn` without the log's entries: the initial
    /// load's, or the durable checkpoint's.
    fn rebuilds(&self, lsn: u64) -> bool {
        lsn == self.lsn_load || self.wal.lsn_checkpoint() == Some(lsn)
    }

    /// After a cut: a log left holding entries that start above the load and continue no
    /// checkpoint (the cut removed the checkpoint above it, and the entries before that
    /// checkpoint were dropped long ago) is one a restart rebuilds nothing from, so it is
    /// unanchored until its next checkpoint (seed 29578). An empty log is the caller's to
    /// judge (its next append says where it continues).
    fn unanchor_unless_rebuildable(&mut self) {
        let Some(base) = self.wal.lsn_base() else {
            return;
        };
        let continues_checkpoint = self
            .wal
            .lsn_checkpoint()
            .is_some_and(|checkpoint| base <= checkpoint);
        if base != self.lsn_load && !continues_checkpoint {
            self.anchored = false;
        }
    }

    /// Whether the log would like a checkpoint now: it is not anchored, so it reports
    /// nothing durable until one anchors it.
    pub fn wants_checkpoint(&self) -> bool {
        !self.anchored && self.checkpoint_writing.is_none()
    }

    /// The LSN of the newest durable checkpoint, if any.
    pub fn lsn_checkpoint(&self) -> Option<u64> {
        self.wal.lsn_checkpoint()
    }

    /// Before a member rewinds its segment to `lsn` to rejoin (a view change discarded the
    /// records above it), cuts the log there and says where the member should rewind to: `lsn`,
    /// or less when the cut fell inside an image (a state transfer's install spans `lsn`: no
    /// part of it can be kept, and the records below it up to `lsn` came only with it). The
    /// member then rewinds to that LSN instead, fetching the pages changed since, and the
    /// log goes on from where it ends without a gap (an unanchored log would report nothing
    /// durable ever again: the simulator's seed 470, k-of-n, stalled a durable group so).
    pub fn align_rejoin(&mut self, lsn: u64) -> Result<u64, WalError> {
        let Some(base) = self.wal.lsn_base() else {
            return Ok(lsn);
        };
        if self.wal.lsn_appended() <= lsn {
            return Ok(lsn);
        }
        self.lsn_sync_wanted = self.lsn_sync_wanted.min(lsn);
        if lsn < base {
            // The log no longer reaches back to `lsn` (a checkpoint let it drop what came
            // before): nothing of it can stay, and it starts again unanchored, until the
            // next checkpoint (which it asks for at once).
            self.wal.cut_after(lsn)?;
            self.anchored = false;
            return Ok(lsn);
        }
        let kept = self.wal.cut_after(lsn)?;
        self.unanchor_unless_rebuildable();
        if kept == lsn {
            return Ok(lsn);
        }
        // Cut before the image: the log ends at its start, or holds nothing from its base on.
        Ok(if self.wal.lsn_base().is_none() {
            base
        } else {
            kept
        })
    }

    /// Makes the log end at `lsn`, the LSN of the segment a role starts on, before the role
    /// appends anything: records above it are cut (a view change discarded them), durably.
    /// A log that ends below it (the segment holds records the log never got) cannot hold
    /// the role's records contiguously: it starts again, unanchored.
    pub fn align(&mut self, lsn: u64) -> Result<Aligned, WalError> {
        // A wish of the history the log leaves behind names nothing of the next.
        self.lsn_sync_wanted = self.lsn_sync_wanted.min(lsn);
        // The role that was taking a checkpoint has ended; the next one begins its own.
        if self.checkpoint_writing.take().is_some() {
            self.wal.checkpoint_abandon()?;
        }
        // A checkpoint above the segment is of a history a view change discarded: the cut
        // removes it, even from an empty log, which the next append then anchors anew.
        if self
            .wal
            .lsn_checkpoint()
            .is_some_and(|checkpoint| checkpoint > lsn)
        {
            self.wal.cut_after(lsn)?;
            if self.wal.lsn_base().is_none() {
                self.anchored = false;
            }
            self.unanchor_unless_rebuildable();
        }
        let end = self.wal.lsn_appended();
        if self.wal.lsn_base().is_none() {
            // The next append continues `lsn`: anchored if a restart rebuilds that state.
            self.anchored = self.rebuilds(lsn);
            return Ok(Aligned::AsItWas);
        }
        if end == lsn {
            return Ok(Aligned::AsItWas);
        }
        if end > lsn {
            let cut = self.wal.cut_after(lsn)?;
            // Emptied down to a checkpoint at `lsn`: the next append continues it.
            let continues = self.wal.lsn_base().is_none() && self.rebuilds(lsn);
            if cut == lsn || continues {
                return Ok(Aligned::Cut {
                    lsn_end_before: end,
                });
            }
        }
        // Below the segment, or a cut inside an image: the history has a gap.
        self.wal.cut_after(0)?;
        assert!(
            self.wal.lsn_base().is_none(),
            "a cut below every entry empties the log"
        );
        self.anchored = false;
        Ok(Aligned::Restarted {
            lsn_end_before: end,
        })
    }
}

/// What a backup's log must hold of what its receiver accepted (`ready`, before the driver
/// hands it to the applier) in view `view`: the image first, then the batches, as the applier
/// takes them; then the primary's wish that they be synced at once, if it said so.
pub fn receiver_orders(ready: &ReceiverReady, view: u64) -> impl Iterator<Item = LogOrder> + '_ {
    let image = ready
        .to_install
        .iter()
        .cloned()
        .map(move |image| LogOrder::Image { image, view });
    let batches = ready.to_apply.iter().map(|apply| LogOrder::Batch {
        batch: apply.batch.clone(),
        lsn_from: apply.lsn_from,
    });
    let sync = ready.sync_wanted.map(|lsn| LogOrder::SyncWanted { lsn });
    image.chain(batches).chain(sync)
}

/// When a node syncs its log on its own (`fsync` in the node's config): how much a power loss
/// may take of what the rules other than `durable` acknowledged. A record a `durable` reply
/// waits for is synced at once whatever the policy ([`LogOrder::SyncWanted`]): the policy
/// decides the cost of the other rules' safety net, not the `durable` rule's promise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Sync every group of appends as it is written (group commit: one sync for all the
    /// batches that arrived while the last one ran).
    Always,
    /// Sync at most every `ms` milliseconds; a power loss takes at most that much.
    EveryMs(u32),
    /// Leave it to the operating system: a crash of the process loses nothing written, a
    /// power loss may take anything not synced for a `durable` record.
    Never,
}

impl SyncPolicy {
    /// Whether the log should sync now: it holds appends not yet synced (`unsynced`) and the
    /// policy's interval has passed since the last sync (`ms_since_sync`).
    pub fn due(self, unsynced: bool, ms_since_sync: u64) -> bool {
        if !unsynced {
            return false;
        }
        match self {
            SyncPolicy::Always => true,
            SyncPolicy::EveryMs(ms) => ms_since_sync >= u64::from(ms),
            SyncPolicy::Never => false,
        }
    }
}

impl fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncPolicy::Always => f.write_str("always"),
            SyncPolicy::EveryMs(ms) => write!(f, "every:{ms}"),
            SyncPolicy::Never => f.write_str("never"),
        }
    }
}

/// A `fsync` setting that is not one of the accepted forms.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown fsync '{0}'; accepted: always, every:MS (1 to 60000), never")]
pub struct SyncPolicyError(pub String);

impl FromStr for SyncPolicy {
    type Err = SyncPolicyError;

    fn from_str(text: &str) -> Result<SyncPolicy, SyncPolicyError> {
        let unknown = || SyncPolicyError(text.to_owned());
        match text.split_once(':') {
            None if text == "always" => Ok(SyncPolicy::Always),
            None if text == "never" => Ok(SyncPolicy::Never),
            Some(("every", ms)) => match ms.parse::<u32>() {
                Ok(ms @ 1..=60_000) => Ok(SyncPolicy::EveryMs(ms)),
                _ => Err(unknown()),
            },
            _ => Err(unknown()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsync_settings_round_trip_and_bad_ones_say_what_is_accepted() {
        for text in ["always", "every:1", "every:250", "never"] {
            let policy: SyncPolicy = text.parse().unwrap();
            assert_eq!(policy.to_string(), text);
        }
        for text in [
            "",
            "sometimes",
            "every",
            "every:0",
            "every:x",
            "every:60001",
            "never:1",
        ] {
            let err = text.parse::<SyncPolicy>().unwrap_err();
            assert!(err.to_string().contains("accepted"), "{text}: {err}");
        }
    }

    fn batch_at(lsn_base: u64, record_count: u64) -> SealedBatch {
        let mut builder =
            tandem_redo::BatchBuilder::new(tandem_redo::BatchKind::Redo, 0, 1, lsn_base);
        for lsn in lsn_base..lsn_base + record_count {
            let mut record = tandem_memory::RedoRecord::empty(lsn);
            record.push_run(lsn * 8, &[lsn as u8; 8]).unwrap();
            let call = tandem_redo::CallId {
                client_id: 1,
                seq: lsn,
            };
            builder.push_redo(call, &record);
        }
        builder.seal()
    }

    fn image(lsn_from: u64, lsn: u64) -> PageImage {
        PageImage {
            lsn_from,
            lsn,
            chunks: vec![Arc::from(&[][..])],
        }
    }

    fn log_of(orders: Vec<LogOrder>) -> LogCore<tandem_wal::SimDisk> {
        let options = WalOptions::default();
        let dir = Path::new("/log");
        let disk = tandem_wal::SimDisk::new();
        let (mut log, _) = LogCore::open(disk, dir, options, SyncPolicy::Always, 0).unwrap();
        for order in orders {
            log.carry_out(order).unwrap();
        }
        log.sync().unwrap();
        log
    }

    /// A fresh log holds nothing, yet a restart rebuilds the initial load: it reports the
    /// load durable, so reads of it under `durable` are not held for a sync that nothing
    /// asks for; a log that lost its anchor still reports nothing.
    #[test]
    fn a_fresh_log_reports_its_initial_load_durable() {
        let disk = tandem_wal::SimDisk::new();
        let dir = Path::new("/log");
        let policy = SyncPolicy::EveryMs(100);
        let (log, _) = LogCore::open(disk, dir, WalOptions::default(), policy, 3).unwrap();
        assert_eq!(
            log.lsn_durable(),
            3,
            "the load at LSN 3 is rebuilt from nothing"
        );
        let mut log = log_of(Vec::new());
        log.carry_out(LogOrder::Batch {
            batch: batch_at(1, 5),
            lsn_from: 1,
        })
        .unwrap();
        log.sync().unwrap();
        assert!(matches!(log.align(7).unwrap(), Aligned::Restarted { .. }));
        assert_eq!(log.lsn_durable(), 0, "unanchored: not even the load");
    }

    /// The simulator's seed 470 (k-of-n, durable:1): a member whose log holds a state
    /// transfer's image across the truncate LSN of a view change could keep no part of it;
    /// its log started again unanchored and reported nothing durable for good, and the group
    /// stalled. It now rewinds to where its log can end instead.
    #[test]
    fn a_rejoin_whose_truncate_lsn_falls_inside_a_logged_image_rewinds_to_its_start() {
        let orders = || {
            vec![
                LogOrder::Batch {
                    batch: batch_at(1, 5),
                    lsn_from: 1,
                },
                LogOrder::Image {
                    image: image(5, 10),
                    view: 1,
                },
            ]
        };
        // The old way: aligning at 7 cannot keep the image, and the log is lost for durable.
        let mut log = log_of(orders());
        assert_eq!(log.lsn_durable(), 10);
        assert!(matches!(log.align(7).unwrap(), Aligned::Restarted { .. }));
        log.carry_out(LogOrder::Image {
            image: image(7, 12),
            view: 1,
        })
        .unwrap();
        log.sync().unwrap();
        assert_eq!(log.lsn_durable(), 0, "unanchored");

        // The rejoin asks first: it rewinds to 5, where the image began, and goes on from there.
        let mut log = log_of(orders());
        assert_eq!(log.align_rejoin(7).unwrap(), 5);
        assert_eq!(log.align(5).unwrap(), Aligned::AsItWas);
        log.carry_out(LogOrder::Image {
            image: image(5, 12),
            view: 1,
        })
        .unwrap();
        log.sync().unwrap();
        assert_eq!(log.lsn_durable(), 12, "anchored: a restart rebuilds it");
        // A truncate LSN outside any image is kept as it is.
        let mut log = log_of(orders());
        assert_eq!(log.align_rejoin(10).unwrap(), 10);
        assert_eq!(log.align_rejoin(3).unwrap(), 3);
        assert_eq!(log.lsn_appended(), 3);
    }

    /// A node's segment under txns, its log fed each commit as a batch and the checkpoints
    /// a [`crate::Checkpointer`] takes between them; segment files small enough that each
    /// checkpoint lets the log drop some.
    struct Logged {
        segment: Segment,
        log: LogCore<tandem_wal::SimDisk>,
        checkpointer: crate::Checkpointer,
        /// The state after each LSN, to compare a restart with.
        states: Vec<Vec<u8>>,
    }

    const PAGES: usize = 64;

    fn small_files() -> WalOptions {
        WalOptions {
            segment_bytes_max: 4096,
            ..WalOptions::default()
        }
    }

    impl Logged {
        fn new() -> Logged {
            let segment = Segment::anonymous(
                PAGES * tandem_memory::PAGE_SIZE,
                tandem_memory::Strategy::V3InlineLog,
            )
            .unwrap();
            let disk = tandem_wal::SimDisk::new();
            let (log, _) = LogCore::open(
                disk,
                Path::new("/log"),
                small_files(),
                SyncPolicy::Always,
                0,
            )
            .unwrap();
            Logged {
                states: vec![segment.bytes().to_vec()],
                segment,
                log,
                checkpointer: crate::Checkpointer::new(2048, 0),
            }
        }

        /// A log after `count` commits (enough of them take checkpoints and drop segments).
        fn committed(count: u8) -> Logged {
            let mut logged = Logged::new();
            for value in 0..count {
                logged.commit(value);
            }
            logged
        }

        /// One txn writing `value` somewhere, logged; then a checkpoint step.
        fn commit(&mut self, value: u8) {
            let lsn = self.segment.lsn() + 1;
            let offset = (lsn as usize * 997) % (PAGES * tandem_memory::PAGE_SIZE - 64);
            let mut txn = self.segment.begin();
            txn.set_range(offset, 64).fill(value);
            let record = txn.commit().clone();
            let mut builder =
                tandem_redo::BatchBuilder::new(tandem_redo::BatchKind::Redo, 0, 3, lsn);
            builder.push_redo(
                tandem_redo::CallId {
                    client_id: 1,
                    seq: lsn,
                },
                &record,
            );
            let batch = builder.seal();
            self.checkpointer.applied(batch.len(), 3);
            self.log
                .carry_out(LogOrder::Batch {
                    batch,
                    lsn_from: lsn,
                })
                .unwrap();
            let mut orders = Vec::new();
            self.checkpointer
                .step(&mut self.segment, self.log.wants_checkpoint(), &mut orders);
            for order in orders {
                self.log.carry_out(order).unwrap();
            }
            self.log.sync().unwrap();
            self.states.push(self.segment.bytes().to_vec());
        }

        /// The machine loses power; the log is opened again and replayed onto a fresh load.
        fn restart(self, seed: u64) -> (Segment, Replayed, Vec<Vec<u8>>, u64) {
            let durable = self.log.lsn_durable();
            let mut disk = self.log.into_disk();
            disk.crash(seed);
            let strategy = tandem_memory::Strategy::V0LinkedUndo;
            let (segment, _, replayed) = reopen(disk, small_files(), strategy);
            let replayed = replayed.expect("the log starts at the load or continues a checkpoint");
            (segment, replayed, self.states, durable)
        }
    }

    /// The simulator's Redis seed 57157 (`durable`, two power losses): a member rewound to a
    /// promotion's truncate LSN took a state transfer from the new primary, then lost power.
    /// Its log held view 1's batches and the image after them, and it reported view 1's
    /// history to the image's LSN; promoted from that report, it made another member keep
    /// a record of view 1 that the history it held had discarded. The image now says its view.
    #[test]
    fn a_restart_reports_the_view_of_the_image_it_installed_last() {
        let mut log = log_of(vec![LogOrder::Batch {
            batch: batch_at(1, 5),
            lsn_from: 1,
        }]);
        log.carry_out(LogOrder::Image {
            image: image(5, 7),
            view: 3,
        })
        .unwrap();
        log.sync().unwrap();
        let strategy = tandem_memory::Strategy::V3InlineLog;
        let (_, _, replayed) = reopen(log.into_disk(), WalOptions::default(), strategy);
        let replayed = replayed.expect("the log starts at the load");
        assert_eq!(replayed.lsn, 7);
        assert_eq!(replayed.images, 1);
        assert_eq!(replayed.view, 3, "the batches were sealed in view 1");
    }

    /// The view a restarted node's config store knows, in these tests.
    const VIEW_KNOWN: u64 = 9;

    /// A restart: the log on `disk` is opened again with `options` (recovery), and what it
    /// gave back is rebuilt on a fresh segment of `strategy` at the load (LSN 0).
    fn reopen(
        disk: tandem_wal::SimDisk,
        options: WalOptions,
        strategy: tandem_memory::Strategy,
    ) -> (Segment, Recovered, Option<Replayed>) {
        let (_, recovered) =
            LogCore::open(disk, Path::new("/log"), options, SyncPolicy::Always, 0).unwrap();
        let mut segment = Segment::anonymous(PAGES * tandem_memory::PAGE_SIZE, strategy).unwrap();
        let replayed = rebuild(&mut segment, &recovered, 0, VIEW_KNOWN).unwrap();
        (segment, recovered, replayed)
    }

    /// The simulator's Redis seeds 51502 and 52028 (`durable`): every node lost power before
    /// any record reached its log; each restarted with an empty log, reported nothing, and
    /// the group waited for good for a node with records. An empty log now rebuilds the
    /// load, which every view's history starts with, and says so for the view it knows.
    #[test]
    fn an_empty_log_rebuilds_the_load_and_a_log_past_a_gap_nothing() {
        // Nothing ever appended.
        let logged = Logged::new();
        let (segment, replayed, _, durable) = logged.restart(1);
        assert_eq!(durable, 0);
        assert_eq!(segment.lsn(), 0);
        let expected = Replayed {
            lsn: 0,
            view: VIEW_KNOWN,
            records: 0,
            images: 0,
        };
        assert_eq!(replayed, expected);

        // Appended, never written nor synced: the crash takes it all.
        let mut log = log_of(Vec::new());
        log.carry_out(LogOrder::Batch {
            batch: batch_at(1, 3),
            lsn_from: 1,
        })
        .unwrap();
        assert_eq!(log.lsn_durable(), 0, "nothing synced");
        let mut disk = log.into_disk();
        disk.crash(3);
        let strategy = tandem_memory::Strategy::V3InlineLog;
        let (_, recovered, replayed) = reopen(disk, WalOptions::default(), strategy);
        assert!(recovered.entries.is_empty(), "{recovered:?}");
        assert_eq!(replayed, Some(expected));

        // A log that starts past a gap (after a state transfer that was not from the load)
        // rebuilds nothing: the node waits to rejoin.
        let log = log_of(vec![LogOrder::Batch {
            batch: batch_at(6, 3),
            lsn_from: 6,
        }]);
        let (_, recovered, replayed) = reopen(log.into_disk(), WalOptions::default(), strategy);
        assert_eq!(recovered.lsn_base(), Some(5));
        assert!(!rebuilds_state(&recovered, 0));
        assert_eq!(replayed, None);
    }

    #[test]
    fn a_restart_installs_the_newest_checkpoint_and_replays_what_follows() {
        for seed in 0..20 {
            let mut logged = Logged::new();
            for value in 0..150u8 {
                logged.commit(value);
            }
            assert!(
                logged.log.lsn_checkpoint().is_some(),
                "checkpoints were taken"
            );
            let (segment, replayed, states, durable) = logged.restart(seed);
            assert!(replayed.lsn >= durable, "seed {seed}: lost durable records");
            assert_eq!(
                segment.bytes(),
                &states[replayed.lsn as usize][..],
                "seed {seed}: the state at LSN {}",
                replayed.lsn
            );
            assert_eq!(replayed.view, 3);
            assert!(
                replayed.records < 150,
                "seed {seed}: replayed {} records, as if no checkpoint",
                replayed.records
            );
        }
    }

    /// A log that could not continue (a gap) asks for a checkpoint, and one anchors it again;
    /// a rewind below a checkpoint deletes it, so a restart never installs a discarded
    /// history.
    #[test]
    fn a_checkpoint_anchors_a_log_again_and_a_rewind_below_it_deletes_it() {
        let mut logged = Logged::new();
        for value in 0..10u8 {
            logged.commit(value);
        }
        // The log loses its history (it cannot continue to the segment's LSN).
        let lsn = logged.segment.lsn();
        logged.log.align(0).unwrap();
        logged.log.align(lsn).unwrap();
        assert_eq!(logged.log.lsn_durable(), 0);
        assert!(logged.log.wants_checkpoint());
        logged.commit(11);
        assert!(!logged.log.wants_checkpoint(), "a checkpoint is under way");
        assert_eq!(logged.log.lsn_durable(), 0);
        // Its pages go to the log between the next commits.
        logged.commit(12);
        logged.commit(13);
        assert!(logged.log.lsn_checkpoint().is_some());
        assert!(!logged.log.wants_checkpoint(), "the checkpoint anchored it");
        assert_eq!(logged.log.lsn_durable(), logged.segment.lsn());

        let checkpoint = logged.log.lsn_checkpoint().expect("a checkpoint");
        logged.log.align(checkpoint - 1).unwrap();
        assert_eq!(
            logged.log.lsn_checkpoint(),
            None,
            "discarded with its history"
        );
    }

    /// The simulator's seed 510937 (`durable`, a power loss): a checkpoint was durable but
    /// the log's last entries, which it covered, were not, so after the crash the log ended
    /// below the checkpoint and recovery emptied it. The node rebuilt the checkpoint's state
    /// and was promoted from it, yet its log reported nothing durable: the replies a retry
    /// found in the dedup table waited for a sync that no new commit brought, for good. What
    /// a checkpoint holds is durable: a restart rebuilds it.
    #[test]
    fn a_log_that_holds_only_its_checkpoint_reports_the_checkpoint_durable() {
        let logged = Logged::committed(40);
        let checkpoint = logged.log.lsn_checkpoint().expect("checkpoints were taken");
        // The crash keeps the checkpoint and none of the log's entries.
        let mut disk = logged.log.into_disk();
        let dir = Path::new("/log");
        let names = tandem_wal::Disk::list(&mut disk, dir).unwrap();
        for name in names.iter().filter(|name| name.ends_with(".wal")) {
            tandem_wal::Disk::remove(&mut disk, &dir.join(name)).unwrap();
        }
        tandem_wal::Disk::sync_dir(&mut disk, dir).unwrap();
        let (log, recovered) =
            LogCore::open(disk, dir, small_files(), SyncPolicy::Always, 0).unwrap();
        assert_eq!(recovered.lsn_checkpoint(), Some(checkpoint));
        assert!(recovered.entries.is_empty());
        assert!(rebuilds_state(&recovered, 0));
        assert_eq!(
            log.lsn_durable(),
            checkpoint,
            "a restart rebuilds the checkpoint"
        );
    }

    /// The simulator's seed 29578 (`bounded:10`, a power loss): a deposed primary rejoined,
    /// and the cut of its log to the truncate LSN removed its newest checkpoint, above that
    /// LSN, as it must; the records below it stayed, but the log had dropped those before the
    /// checkpoint, so a restart could rebuild nothing from it. The log still reported its
    /// records durable (the next syncs reached 3140), and after the power loss the disk gave
    /// back a log starting at 2439 and no checkpoint. A cut that leaves a log no restart can
    /// rebuild leaves it unanchored (it reports nothing durable and asks for a checkpoint).
    #[test]
    fn a_rejoin_whose_cut_removes_the_checkpoint_the_log_needs_leaves_it_unanchored() {
        let mut logged = Logged::committed(150);
        let checkpoint = logged.log.lsn_checkpoint().expect("checkpoints were taken");
        let base = logged.log.wal.lsn_base().expect("a log");
        assert!(
            base > 0,
            "the checkpoints let the log drop its first records"
        );
        assert!(base < checkpoint, "the log reaches below its checkpoint");
        let lsn = checkpoint - 1;
        assert_eq!(logged.log.align_rejoin(lsn).unwrap(), lsn);
        assert_eq!(
            logged.log.lsn_checkpoint(),
            None,
            "the cut removed the checkpoint"
        );
        assert_eq!(
            logged.log.lsn_durable(),
            0,
            "a restart rebuilds nothing from it"
        );
        assert!(logged.log.wants_checkpoint());
        // Aligned at the same place once the role starts, it stays so.
        logged.log.align(lsn).unwrap();
        assert_eq!(logged.log.lsn_durable(), 0);
        let (_, recovered, replayed) = reopen(
            logged.log.into_disk(),
            small_files(),
            tandem_memory::Strategy::V3InlineLog,
        );
        assert!(!rebuilds_state(&recovered, 0));
        assert_eq!(replayed, None);
    }

    #[test]
    fn each_policy_syncs_when_it_says() {
        for policy in [
            SyncPolicy::Always,
            SyncPolicy::EveryMs(1000),
            SyncPolicy::Never,
        ] {
            assert!(!policy.due(false, u64::MAX), "{policy}: nothing to sync");
        }
        assert!(SyncPolicy::Always.due(true, 0));
        assert!(!SyncPolicy::EveryMs(10).due(true, 9));
        assert!(SyncPolicy::EveryMs(10).due(true, 10));
        assert!(!SyncPolicy::Never.due(true, u64::MAX));
    }
}
