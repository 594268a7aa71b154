//! The few file operations the log needs, behind a trait so the same writer and recovery run on
//! the real file system ([`FsDisk`]) and on the simulated disk ([`crate::SimDisk`]).
//!
//! The contract every implementation keeps, and the writer relies on:
//! - `append` may only reach the page cache; bytes are durable once `sync` of that file
//!   returned `Ok`. It writes after the last byte appended through the handle (or the file's
//!   end when it was opened), over the zeros [`Disk::extend_zeroed`] put there.
//! - `extend_zeroed` is durable when it returns `Ok`: the zeros, the file's new size, and every
//!   byte appended before it.
//! - A file's directory entry (its creation or its removal) is durable once `sync_dir` of its
//!   directory returned `Ok`; until then a crash may undo it.
//! - `rename` replaces the file's name at once for readers, and is durable, like a creation or
//!   a removal, once `sync_dir` of the directory returned `Ok`: until then a crash may leave the
//!   file under either name (never under both, never under neither, on a journalling file
//!   system; the simulated disk draws one of the two). The file's bytes are not made durable by a
//!   rename: whoever wants a complete file under the new name syncs it first. A handle opened on
//!   the old name is not used after the rename.
//! - `truncate` is durable when it returns `Ok` (recovery cuts and then continues at once).
//! - After any `Err`, nothing is known about what reached the disk: the caller must not retry
//!   and must not assume the bytes are either there or gone (see [`crate::Wal`] on poisoning).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::Path;

/// The mode [`FsDisk`] creates directories with: the log holds the node's data, which no
/// other user of the machine may list or read, whatever the process's umask.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// The mode [`FsDisk`] creates segment and checkpoint files with (owner read and write).
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// File operations of the write-ahead log.
pub trait Disk: std::fmt::Debug {
    /// An open file the log appends to.
    type File: std::fmt::Debug;
    /// A whole file's bytes, as [`Disk::read_whole`] gives them.
    type Whole: AsRef<[u8]> + Send + Sync + std::fmt::Debug + 'static;

    /// Creates `dir` and its parents if they are missing.
    fn create_dir_all(&mut self, dir: &Path) -> io::Result<()>;
    /// Names of the files in `dir`, in no particular order.
    fn list(&mut self, dir: &Path) -> io::Result<Vec<String>>;
    /// Creates an empty file at `path` (emptying any file already there) and opens it to append.
    fn create(&mut self, path: &Path) -> io::Result<Self::File>;
    /// Opens an existing file to append at its end.
    fn open_append(&mut self, path: &Path) -> io::Result<Self::File>;
    /// Appends `bytes` after the last byte appended (over any zeros [`Disk::extend_zeroed`] put
    /// there); they may stay cached until [`Disk::sync`].
    fn append(&mut self, file: &mut Self::File, bytes: &[u8]) -> io::Result<()>;
    /// Makes the file's appended bytes durable (`fdatasync`).
    fn sync(&mut self, file: &mut Self::File) -> io::Result<()>;
    /// Makes the file at least `len` bytes long by writing zeros after its end, durably (it
    /// syncs the file), without moving where the next append goes. Appends that land on those
    /// zeros then leave the file's size alone, so their sync writes the data only: on ext4 a
    /// sync that grows a file also commits the journal, which costs as much again.
    fn extend_zeroed(&mut self, file: &mut Self::File, len: u64) -> io::Result<()>;
    /// The whole contents of the file at `path`.
    fn read(&mut self, path: &Path) -> io::Result<Vec<u8>>;
    /// The whole contents of a file nothing writes any more (a complete checkpoint, renamed
    /// to its final name after its last sync), as large as the database it holds: mapped
    /// rather than copied into fresh memory, where the disk can.
    fn read_whole(&mut self, path: &Path) -> io::Result<Self::Whole>;
    /// Cuts the file at `path` to `len` bytes, durably.
    fn truncate(&mut self, path: &Path, len: u64) -> io::Result<()>;
    /// Removes the file at `path`; durable after [`Disk::sync_dir`].
    fn remove(&mut self, path: &Path) -> io::Result<()>;
    /// Gives the file at `from` the name `to` (in the same directory, replacing any file there);
    /// durable after [`Disk::sync_dir`].
    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the creations, removals and renames of entries in `dir` durable.
    fn sync_dir(&mut self, dir: &Path) -> io::Result<()>;
}

/// The real file system through `std::fs`.
#[derive(Clone, Copy, Debug, Default)]
pub struct FsDisk;

/// A file [`FsDisk`] appends to: positional writes at `end`, since the file may run on past it
/// in zeros (an `O_APPEND` file would write after them).
#[derive(Debug)]
pub struct FsFile {
    file: File,
    /// Where the next append goes.
    end: u64,
}

/// Zeros written a block at a time by [`Disk::extend_zeroed`].
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// A whole file's bytes from [`FsDisk`]: mapped, or read when it is empty (a mapping of no
/// bytes is refused).
#[derive(Debug)]
pub enum FileBytes {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl AsRef<[u8]> for FileBytes {
    fn as_ref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(map) => map,
            FileBytes::Read(bytes) => bytes,
        }
    }
}

impl Disk for FsDisk {
    type File = FsFile;
    type Whole = FileBytes;

    fn create_dir_all(&mut self, dir: &Path) -> io::Result<()> {
        // Only the directories created here get the mode; one that exists keeps its own
        // (the node tightens its data directories, and says so, before it opens the log).
        fs::DirBuilder::new()
            .recursive(true)
            .mode(PRIVATE_DIR_MODE)
            .create(dir)
    }

    fn list(&mut self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            // A name that is not UTF-8 is no segment of ours; the log leaves it alone.
            if entry.file_type()?.is_file()
                && let Ok(name) = entry.file_name().into_string()
            {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn create(&mut self, path: &Path) -> io::Result<FsFile> {
        // The mode applies at creation, so the file is never readable by others, not even
        // for a moment; the umask can only take bits away from it.
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(PRIVATE_FILE_MODE)
            .open(path)?;
        Ok(FsFile { file, end: 0 })
    }

    fn open_append(&mut self, path: &Path) -> io::Result<FsFile> {
        let file = OpenOptions::new().write(true).open(path)?;
        let end = file.metadata()?.len();
        Ok(FsFile { file, end })
    }

    fn append(&mut self, file: &mut FsFile, bytes: &[u8]) -> io::Result<()> {
        file.file.write_all_at(bytes, file.end)?;
        file.end += bytes.len() as u64;
        Ok(())
    }

    fn sync(&mut self, file: &mut FsFile) -> io::Result<()> {
        // fdatasync: the data and the metadata needed to read it back (the file's size, which
        // appends past the zeros change), not the timestamps.
        file.file.sync_data()
    }

    fn extend_zeroed(&mut self, file: &mut FsFile, len: u64) -> io::Result<()> {
        let mut at = file.file.metadata()?.len().max(file.end);
        while at < len {
            let block = (len - at).min(ZEROS.len() as u64) as usize;
            file.file.write_all_at(&ZEROS[..block], at)?;
            at += block as u64;
        }
        file.file.sync_data()
    }

    fn read(&mut self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    #[allow(unsafe_code)]
    fn read_whole(&mut self, path: &Path) -> io::Result<FileBytes> {
        let file = File::open(path)?;
        if file.metadata()?.len() == 0 {
            return Ok(FileBytes::Read(Vec::new()));
        }
        // SAFETY: a mapping is sound while no one changes the file under it. `read_whole` is
        // for files nothing writes any more: a checkpoint gets its final name only after its
        // last write and sync, and from then on the log only removes it (an unlinked file
        // stays mapped as it was). The node owns its log directory; another process writing
        // into it would corrupt the log whether or not it is mapped. Pages are populated at
        // once: the caller reads every byte (checksums, then the install).
        let map = unsafe { memmap2::MmapOptions::new().populate().map(&file)? };
        Ok(FileBytes::Mapped(map))
    }

    fn truncate(&mut self, path: &Path, len: u64) -> io::Result<()> {
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(len)?;
        file.sync_all()
    }

    fn remove(&mut self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn sync_dir(&mut self, dir: &Path) -> io::Result<()> {
        // On Linux a directory opened read-only can be fsynced, which makes its entries durable.
        File::open(dir)?.sync_all()
    }
}

/// A borrowed disk is a disk, so a caller keeps its disk across a [`crate::Wal::open`] that
/// fails (a test crashing recovery itself, say).
impl<D: Disk + ?Sized> Disk for &mut D {
    type File = D::File;
    type Whole = D::Whole;

    fn create_dir_all(&mut self, dir: &Path) -> io::Result<()> {
        (**self).create_dir_all(dir)
    }

    fn list(&mut self, dir: &Path) -> io::Result<Vec<String>> {
        (**self).list(dir)
    }

    fn create(&mut self, path: &Path) -> io::Result<D::File> {
        (**self).create(path)
    }

    fn open_append(&mut self, path: &Path) -> io::Result<D::File> {
        (**self).open_append(path)
    }

    fn append(&mut self, file: &mut D::File, bytes: &[u8]) -> io::Result<()> {
        (**self).append(file, bytes)
    }

    fn sync(&mut self, file: &mut D::File) -> io::Result<()> {
        (**self).sync(file)
    }

    fn extend_zeroed(&mut self, file: &mut D::File, len: u64) -> io::Result<()> {
        (**self).extend_zeroed(file, len)
    }

    fn read(&mut self, path: &Path) -> io::Result<Vec<u8>> {
        (**self).read(path)
    }

    fn read_whole(&mut self, path: &Path) -> io::Result<D::Whole> {
        (**self).read_whole(path)
    }

    fn truncate(&mut self, path: &Path, len: u64) -> io::Result<()> {
        (**self).truncate(path, len)
    }

    fn remove(&mut self, path: &Path) -> io::Result<()> {
        (**self).remove(path)
    }

    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        (**self).rename(from, to)
    }

    fn sync_dir(&mut self, dir: &Path) -> io::Result<()> {
        (**self).sync_dir(dir)
    }
}
