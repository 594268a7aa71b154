//! A simulated disk: in memory, deterministic, and able to crash.
//!
//! Fault model. Each file keeps two things: the bytes a reader sees now (the page cache) and how
//! many of them are durable (its synced prefix: `append` adds cached bytes, `sync` makes all of
//! them durable). A directory entry — a file's creation or its removal — is durable once its
//! directory is synced. [`SimDisk::crash`] then draws, from its seed alone:
//! - for every file, its synced prefix plus some prefix of its unsynced bytes cut at a 512-byte
//!   sector boundary (or at the end), where the last kept sector may be torn: from a drawn point
//!   to its end it holds garbage or zeros instead of what was written (never inside the synced
//!   prefix: synced bytes are kept as they are);
//! - a file whose creation was never made durable may vanish, and a file whose removal was never
//!   made durable may come back with its synced bytes;
//! - a file renamed since its name was last made durable is found, one time in two, under that
//!   older name instead of the new one (with the bytes drawn as above: a rename makes no byte
//!   durable); a file renamed before its creation was ever made durable may vanish instead.
//!
//! Sectors are only kept as a prefix (a disk that writes sectors back out of order is not
//! modelled). `truncate` is durable when it returns, as [`crate::Disk`] says.
//!
//! A file extended with zeros (`extend_zeroed`) keeps them, durably, after what was appended: a
//! crash cuts the appended bytes as above, and where they are cut the zeros show again (the
//! appends overwrote zeros that were already on the disk). A `truncate` inside the zeros makes
//! those below the cut the file's own bytes: the next append lands after them.
//!
//! Further faults: [`SimDisk::fail_next_sync`] and [`SimDisk::fail_next_append`] make the next
//! such call fail (a failed sync, of a file or of a directory, makes nothing durable), and
//! [`SimDisk::halt_after_ops`] makes every operation after the given number fail, which stops a
//! run at any chosen point so that a test can crash the disk there.
//!
//! No clock, no thread RNG, no hash map: the same calls and seeds give the same disk.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::Disk;

/// The sector size at which a crash cuts unsynced bytes.
pub const SECTOR_BYTES: usize = 512;

impl SimFile {
    fn contents(&self) -> Vec<u8> {
        let mut bytes = self.data.clone();
        bytes.resize(self.data.len().max(self.zeroed_len), 0);
        bytes
    }
}

#[derive(Clone, Debug, Default)]
struct SimFile {
    /// What a reader sees now.
    data: Vec<u8>,
    /// How many of `data`'s bytes a crash keeps for certain.
    durable_len: usize,
    /// The file's length on the disk when zeros run on after `data` (`extend_zeroed`): a
    /// reader sees `data` and then zeros up to here. Durable, like the zeros.
    zeroed_len: usize,
    /// Whether the file's creation survives a crash under its current name.
    entry_durable: bool,
    /// The name under which the file's entry is durable, when a rename to its current name is
    /// not durable yet: a crash may put the file back there.
    renamed_from: Option<PathBuf>,
}

/// An open simulated file: its path (appending to a file removed since fails).
#[derive(Clone, Debug)]
pub struct SimHandle {
    path: PathBuf,
}

/// The simulated disk. Cloning it copies every file, so a test can crash a copy taken at any
/// point of a run.
#[derive(Clone, Debug, Default)]
pub struct SimDisk {
    dirs: std::collections::BTreeSet<PathBuf>,
    files: BTreeMap<PathBuf, SimFile>,
    /// Files removed whose removal is not durable yet: their synced bytes, which a crash may
    /// bring back.
    removed: BTreeMap<PathBuf, Vec<u8>>,
    fail_next_sync: bool,
    fail_next_append: bool,
    /// Operations done so far, and after how many every operation fails.
    ops: u64,
    halt_after_ops: Option<u64>,
    syncs: u64,
}

/// A deterministic generator (SplitMix64) for the crash draws.
#[derive(Clone, Debug)]
struct CrashRng(u64);

impl CrashRng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound`.
    fn below(&mut self, bound: usize) -> usize {
        assert!(bound > 0);
        (self.next_u64() % bound as u64) as usize
    }

    fn chance(&mut self, numerator: usize, denominator: usize) -> bool {
        self.below(denominator) < numerator
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} does not exist", path.display()),
    )
}

impl SimDisk {
    pub fn new() -> SimDisk {
        SimDisk::default()
    }

    /// Makes the next `sync` or `sync_dir`, whichever comes first, fail without making anything
    /// durable.
    pub fn fail_next_sync(&mut self) {
        self.fail_next_sync = true;
    }

    /// Makes the next `append` fail without appending.
    pub fn fail_next_append(&mut self) {
        self.fail_next_append = true;
    }

    /// Makes every operation after the next `ops` fail, as if the machine stopped there.
    pub fn halt_after_ops(&mut self, ops: u64) {
        self.halt_after_ops = Some(self.ops + ops);
    }

    /// Operations done so far (every call of the [`Disk`] trait counts one).
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// Successful file syncs so far.
    pub fn syncs(&self) -> u64 {
        self.syncs
    }

    /// What a reader sees in the file at `path` now, if it exists.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        self.files.get(path).map(SimFile::contents)
    }

    /// Writes a whole file, durably, as a test's starting state.
    pub fn put_durable(&mut self, path: &Path, bytes: &[u8]) {
        let parent = path.parent().expect("a file lives in a directory");
        self.dirs.insert(parent.to_path_buf());
        let file = SimFile {
            data: bytes.to_vec(),
            durable_len: bytes.len(),
            zeroed_len: 0,
            entry_durable: true,
            renamed_from: None,
        };
        self.files.insert(path.to_path_buf(), file);
    }

    /// Loses power: keeps what the fault model says survives, drawn from `seed`, and clears the
    /// pending faults. Afterwards every file is durable as it is.
    pub fn crash(&mut self, seed: u64) {
        let mut rng = CrashRng(seed);
        let mut files = BTreeMap::new();
        let mut moved_back = Vec::new();
        for (path, mut file) in std::mem::take(&mut self.files) {
            assert!(file.durable_len <= file.data.len());
            let (path, back) = match file.renamed_from.take() {
                Some(older) if rng.chance(1, 2) => (older, true),
                Some(_) => (path, false),
                None if !file.entry_durable && rng.chance(1, 2) => continue,
                None => (path, false),
            };
            let kept_len = Self::draw_kept_len(&mut rng, &file);
            Self::maybe_tear(&mut rng, &mut file, kept_len);
            file.data.truncate(kept_len);
            if back {
                moved_back.push((path, file));
            } else {
                files.insert(path, file);
            }
        }
        // A name taken twice (a file renamed away and a new one created under its old name, both
        // undurably) keeps the file that holds it now.
        for (path, file) in moved_back {
            files.entry(path).or_insert(file);
        }
        for (path, durable) in std::mem::take(&mut self.removed) {
            if !files.contains_key(&path) && rng.chance(1, 2) {
                let file = SimFile {
                    durable_len: durable.len(),
                    data: durable,
                    zeroed_len: 0,
                    entry_durable: true,
                    renamed_from: None,
                };
                files.insert(path, file);
            }
        }
        for file in files.values_mut() {
            file.durable_len = file.data.len();
            file.entry_durable = true;
            file.renamed_from = None;
        }
        self.files = files;
        self.fail_next_sync = false;
        self.fail_next_append = false;
        self.halt_after_ops = None;
    }

    /// The synced prefix plus a drawn number of unsynced bytes, ending at a sector boundary or
    /// at the end of what was written.
    fn draw_kept_len(rng: &mut CrashRng, file: &SimFile) -> usize {
        let (durable, len) = (file.durable_len, file.data.len());
        let mut ends = vec![durable];
        let first_boundary = (durable / SECTOR_BYTES + 1) * SECTOR_BYTES;
        ends.extend((first_boundary..len).step_by(SECTOR_BYTES));
        if len > durable {
            ends.push(len);
        }
        ends[rng.below(ends.len())]
    }

    /// Tears the last kept sector (its unsynced part only) from a drawn point, one time in three.
    fn maybe_tear(rng: &mut CrashRng, file: &mut SimFile, kept_len: usize) {
        if kept_len <= file.durable_len || !rng.chance(1, 3) {
            return;
        }
        let sector_start = (kept_len - 1) / SECTOR_BYTES * SECTOR_BYTES;
        let tear_from = sector_start.max(file.durable_len);
        let tear_at = tear_from + rng.below(kept_len - tear_from);
        let zeros = rng.chance(1, 2);
        for byte in &mut file.data[tear_at..kept_len] {
            *byte = if zeros { 0 } else { rng.next_u64() as u8 };
        }
    }

    /// Counts an operation, and fails it once the disk is halted.
    fn operate(&mut self, what: &str, path: &Path) -> io::Result<()> {
        self.ops += 1;
        if let Some(halt) = self.halt_after_ops
            && self.ops > halt
        {
            let message = format!("simulated disk halted before {what} {}", path.display());
            return Err(io::Error::other(message));
        }
        Ok(())
    }

    /// Takes note of a file gone from `path` (removed, or replaced by a rename): if a name of
    /// it was durable, a crash before the directory is synced may bring back its synced bytes
    /// under that name.
    fn forget(&mut self, path: &Path, file: SimFile) {
        let name = if file.entry_durable {
            Some(path.to_path_buf())
        } else {
            file.renamed_from
        };
        if let Some(name) = name {
            let mut durable = file.data;
            durable.truncate(file.durable_len);
            self.removed.insert(name, durable);
        }
    }

    fn file_mut(&mut self, path: &Path) -> io::Result<&mut SimFile> {
        self.files.get_mut(path).ok_or_else(|| not_found(path))
    }
}

impl Disk for SimDisk {
    type File = SimHandle;
    type Whole = Vec<u8>;

    fn create_dir_all(&mut self, dir: &Path) -> io::Result<()> {
        self.operate("creating directory", dir)?;
        self.dirs.insert(dir.to_path_buf());
        Ok(())
    }

    fn list(&mut self, dir: &Path) -> io::Result<Vec<String>> {
        self.operate("listing", dir)?;
        if !self.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let names = self.files.keys().filter(|path| path.parent() == Some(dir));
        let names = names.filter_map(|path| path.file_name()?.to_str().map(str::to_owned));
        Ok(names.collect())
    }

    fn create(&mut self, path: &Path) -> io::Result<SimHandle> {
        self.operate("creating", path)?;
        let parent = path.parent().expect("a file lives in a directory");
        if !self.dirs.contains(parent) {
            return Err(not_found(parent));
        }
        let file = self.files.entry(path.to_path_buf()).or_default();
        file.data.clear();
        file.durable_len = 0;
        file.zeroed_len = 0;
        Ok(SimHandle {
            path: path.to_path_buf(),
        })
    }

    fn open_append(&mut self, path: &Path) -> io::Result<SimHandle> {
        self.operate("opening", path)?;
        self.file_mut(path)?;
        Ok(SimHandle {
            path: path.to_path_buf(),
        })
    }

    fn append(&mut self, handle: &mut SimHandle, bytes: &[u8]) -> io::Result<()> {
        self.operate("appending to", &handle.path)?;
        if std::mem::take(&mut self.fail_next_append) {
            let message = format!("simulated append failure on {}", handle.path.display());
            return Err(io::Error::other(message));
        }
        self.file_mut(&handle.path)?.data.extend_from_slice(bytes);
        Ok(())
    }

    fn sync(&mut self, handle: &mut SimHandle) -> io::Result<()> {
        self.operate("syncing", &handle.path)?;
        if std::mem::take(&mut self.fail_next_sync) {
            let message = format!("simulated sync failure on {}", handle.path.display());
            return Err(io::Error::other(message));
        }
        let file = self.file_mut(&handle.path)?;
        file.durable_len = file.data.len();
        self.syncs += 1;
        Ok(())
    }

    fn extend_zeroed(&mut self, handle: &mut SimHandle, len: u64) -> io::Result<()> {
        self.operate("extending", &handle.path)?;
        if std::mem::take(&mut self.fail_next_sync) {
            let message = format!("simulated sync failure on {}", handle.path.display());
            return Err(io::Error::other(message));
        }
        let file = self.file_mut(&handle.path)?;
        let len = usize::try_from(len).expect("a simulated file fits in memory");
        file.zeroed_len = file.zeroed_len.max(len);
        file.durable_len = file.data.len();
        self.syncs += 1;
        Ok(())
    }

    fn read(&mut self, path: &Path) -> io::Result<Vec<u8>> {
        self.operate("reading", path)?;
        Ok(self.file_mut(path)?.contents())
    }

    fn read_whole(&mut self, path: &Path) -> io::Result<Vec<u8>> {
        self.read(path)
    }

    fn truncate(&mut self, path: &Path, len: u64) -> io::Result<()> {
        self.operate("truncating", path)?;
        let file = self.file_mut(path)?;
        let len = usize::try_from(len).expect("a simulated file fits in memory");
        assert!(
            len <= file.data.len().max(file.zeroed_len),
            "the log only ever cuts files shorter"
        );
        // A cut inside the zeros after `data` keeps those below it as the file's own bytes,
        // and an append lands after them, as on a real file of that length (the simulated
        // disk once appended over them: Redis seed 64195 read a synced entry back corrupt).
        file.data.resize(len, 0);
        file.durable_len = file.data.len();
        file.zeroed_len = len;
        Ok(())
    }

    fn remove(&mut self, path: &Path) -> io::Result<()> {
        self.operate("removing", path)?;
        let file = self.files.remove(path).ok_or_else(|| not_found(path))?;
        self.forget(path, file);
        Ok(())
    }

    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        self.operate("renaming", from)?;
        assert_eq!(
            from.parent(),
            to.parent(),
            "the log renames within its directory"
        );
        let mut file = self.files.remove(from).ok_or_else(|| not_found(from))?;
        if let Some(replaced) = self.files.remove(to) {
            self.forget(to, replaced);
        }
        // The name a crash may go back to: the old one if it was durable, else whatever name
        // was durable before it.
        let durable_name = if file.entry_durable {
            Some(from.to_path_buf())
        } else {
            file.renamed_from.take()
        };
        if durable_name.as_deref() == Some(to) {
            file.entry_durable = true;
        } else {
            file.entry_durable = false;
            file.renamed_from = durable_name;
        }
        self.files.insert(to.to_path_buf(), file);
        Ok(())
    }

    fn sync_dir(&mut self, dir: &Path) -> io::Result<()> {
        self.operate("syncing directory", dir)?;
        if std::mem::take(&mut self.fail_next_sync) {
            let message = format!("simulated sync failure on {}", dir.display());
            return Err(io::Error::other(message));
        }
        for (path, file) in &mut self.files {
            if path.parent() == Some(dir) {
                file.entry_durable = true;
                file.renamed_from = None;
            }
        }
        self.removed.retain(|path, _| path.parent() != Some(dir));
        Ok(())
    }
}
