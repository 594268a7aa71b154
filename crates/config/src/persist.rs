//! What the config store keeps across a crash, how it is encoded, and where it goes.
//!
//! The whole state is one small value, [`Persisted`]: Raft's hard state and membership, the
//! last snapshot of the map, and the log entries after it. The map is tiny and the log is
//! compacted every [`crate::SNAPSHOT_INTERVAL_ENTRIES`] applied entries, so every save writes
//! the whole value; a save is then atomic by construction (one file, renamed into place), and
//! there is no log-structured format to recover.
//!
//! ```text
//! state image (FileDurable's file, MemDurable's bytes)
//!  0   8  magic      "TNDMCFG" then the format version byte, 0x01
//!  8   4  len        u32 LE, payload length
//! 12   4  crc        u32 LE, CRC32C of bytes 0..12 followed by the payload
//! 16   …  payload    postcard(Persisted): integers are LEB128 varints, a Vec or a map is its
//!                    varint length then its items, an Option is a 0/1 byte then the value
//! ```
//!
//! Crash points of a save ([`FileDurable`]): before the rename, the old file is intact and
//! the temporary file is ignored (and removed) at the next open; after the rename and before
//! the directory fsync, either file may be found, each whole and checksummed. A file whose
//! length or checksum does not match (a torn write, a flipped bit) is reported as corrupt,
//! naming the file; it is never taken for an empty state, which could let the node vote
//! twice in a term.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::map::{ClusterMap, NodeId};

/// The config store's durable state (see the module documentation for its encoding).
///
/// Fields are public for inspection (tests, the simulator's checkers, `tandem status`); a
/// value is only ever made by [`crate::ConfigCore`] or decoded from an image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Persisted {
    /// Raft's hard state: the current term, the vote cast in it (0: none) and the highest
    /// index known committed.
    pub term: u64,
    pub vote: NodeId,
    pub commit: u64,
    /// Raft membership: fixed at the cluster's first start.
    pub voters: Vec<NodeId>,
    pub learners: Vec<NodeId>,
    /// The map after applying every entry up to `snapshot_index` (of term `snapshot_term`).
    pub snapshot_index: u64,
    pub snapshot_term: u64,
    pub snapshot_map: ClusterMap,
    /// The log entries `snapshot_index + 1 ..`, contiguous.
    pub entries: Vec<PersistedEntry>,
}

/// One Raft log entry as saved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PersistedEntry {
    pub index: u64,
    pub term: u64,
    /// raft-rs's `EntryType` value: 0 normal (a command, or empty for a new leader's first
    /// entry); the config store proposes nothing else, but saves whatever the log holds.
    pub entry_type: i32,
    pub data: Vec<u8>,
    pub context: Vec<u8>,
}

/// Magic and format version of a state image.
pub const STATE_MAGIC: [u8; 8] = *b"TNDMCFG\x01";
const HEADER_LEN: usize = 16;

/// Why a state image was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CorruptState {
    #[error("{len} bytes is shorter than the {HEADER_LEN}-byte header (torn write?)")]
    TooShort { len: usize },
    #[error("bad magic {found:02x?}: not a config store state image, or another version")]
    BadMagic { found: [u8; 8] },
    #[error("the header says {header} payload bytes but {found} follow (torn write?)")]
    LengthMismatch { header: u64, found: u64 },
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum { stored: u32, computed: u32 },
    #[error("the payload passed its checksum but does not decode: {reason}")]
    Undecodable { reason: String },
}

impl Persisted {
    /// The image described in the module documentation.
    pub fn encode(&self) -> Vec<u8> {
        let payload = postcard::to_allocvec(self).expect("a state always serializes");
        let len = u32::try_from(payload.len()).expect("the state is compacted: far below 4 GiB");
        let mut image = Vec::with_capacity(HEADER_LEN + payload.len());
        image.extend_from_slice(&STATE_MAGIC);
        image.extend_from_slice(&len.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&image), &payload);
        image.extend_from_slice(&crc.to_le_bytes());
        image.extend_from_slice(&payload);
        assert_eq!(image.len(), HEADER_LEN + payload.len());
        image
    }

    /// Decodes an image; never panics, whatever the bytes.
    pub fn decode(image: &[u8]) -> Result<Persisted, CorruptState> {
        if image.len() < HEADER_LEN {
            return Err(CorruptState::TooShort { len: image.len() });
        }
        let (header, payload) = image.split_at(HEADER_LEN);
        let magic: [u8; 8] = header[0..8].try_into().expect("8 bytes");
        if magic != STATE_MAGIC {
            return Err(CorruptState::BadMagic { found: magic });
        }
        let len = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        if u64::from(len) != payload.len() as u64 {
            return Err(CorruptState::LengthMismatch {
                header: u64::from(len),
                found: payload.len() as u64,
            });
        }
        let stored = u32::from_le_bytes(header[12..16].try_into().expect("4 bytes"));
        let computed = crc32c::crc32c_append(crc32c::crc32c(&header[0..12]), payload);
        if stored != computed {
            return Err(CorruptState::Checksum { stored, computed });
        }
        match postcard::take_from_bytes::<Persisted>(payload) {
            Ok((persisted, [])) => Ok(persisted),
            Ok((_, rest)) => Err(CorruptState::Undecodable {
                reason: format!("{} trailing bytes", rest.len()),
            }),
            Err(error) => Err(CorruptState::Undecodable {
                reason: error.to_string(),
            }),
        }
    }
}

/// Where [`crate::ConfigCore::ready`] saves the state. `save` returns only once the state
/// would survive a crash (for a file: written, fsynced, renamed, directory fsynced); the core
/// releases no message that depends on the state before that. An error poisons the core.
pub trait Durable {
    fn save(&mut self, state: &Persisted) -> io::Result<()>;
}

/// A disk in memory, for tests and the simulator. It keeps the image of the last successful
/// save, which is all a crash leaves: a restart decodes it ([`MemDurable::load`]), so the
/// state in the core's memory that was never saved is lost exactly as with a real crash.
///
/// Fault model: [`MemDurable::set_failing`] makes saves fail (the previous image stays);
/// [`MemDurable::image_mut`] lets a test tear or corrupt the image.
#[derive(Clone, Debug, Default)]
pub struct MemDurable {
    image: Option<Vec<u8>>,
    saves: u64,
    failing: bool,
}

impl MemDurable {
    pub fn new() -> MemDurable {
        MemDurable::default()
    }

    /// What a node restarting on this disk finds.
    pub fn load(&self) -> Result<Option<Persisted>, CorruptState> {
        self.image.as_deref().map(Persisted::decode).transpose()
    }

    /// The number of successful saves.
    pub fn saves(&self) -> u64 {
        self.saves
    }

    /// While failing, every save returns an error and leaves the previous image.
    pub fn set_failing(&mut self, failing: bool) {
        self.failing = failing;
    }

    pub fn image(&self) -> Option<&[u8]> {
        self.image.as_deref()
    }

    pub fn image_mut(&mut self) -> Option<&mut Vec<u8>> {
        self.image.as_mut()
    }
}

impl Durable for MemDurable {
    fn save(&mut self, state: &Persisted) -> io::Result<()> {
        if self.failing {
            return Err(io::Error::other("MemDurable: injected save failure"));
        }
        self.image = Some(state.encode());
        self.saves += 1;
        Ok(())
    }
}

/// The runtime's disk: one state file in a directory, replaced atomically on every save.
#[derive(Debug)]
pub struct FileDurable {
    dir: PathBuf,
    path: PathBuf,
    path_tmp: PathBuf,
}

impl FileDurable {
    pub const FILE_NAME: &'static str = "config.state";
    const FILE_NAME_TMP: &'static str = "config.state.tmp";

    /// Opens (creating it if needed) the directory and reads the state saved there: None on a
    /// node's first start. A corrupt or torn file is an `InvalidData` error naming the file;
    /// the operator decides (restore it, or wipe the node and let it rejoin), never this code.
    pub fn open(dir: impl AsRef<Path>) -> io::Result<(FileDurable, Option<Persisted>)> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir)?;
        let durable = FileDurable {
            path: dir.join(Self::FILE_NAME),
            path_tmp: dir.join(Self::FILE_NAME_TMP),
            dir,
        };
        // A temporary file is a save that crashed before its rename: the state file (or its
        // absence) is still the last completed save.
        match fs::remove_file(&durable.path_tmp) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        let image = match fs::read(&durable.path) {
            Ok(image) => image,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok((durable, None)),
            Err(error) => {
                let message = format!("reading {}: {error}", durable.path.display());
                return Err(io::Error::new(error.kind(), message));
            }
        };
        let persisted = Persisted::decode(&image).map_err(|error| {
            let message = format!(
                "{} is corrupt: {error}; restore it from a backup or wipe this node's config \
                 directory so it rejoins",
                durable.path.display()
            );
            io::Error::new(io::ErrorKind::InvalidData, message)
        })?;
        Ok((durable, Some(persisted)))
    }

    /// The state file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Durable for FileDurable {
    fn save(&mut self, state: &Persisted) -> io::Result<()> {
        let image = state.encode();
        let mut file = File::create(&self.path_tmp)?;
        file.write_all(&image)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&self.path_tmp, &self.path)?;
        // The rename is durable only once the directory entry is.
        File::open(&self.dir)?.sync_all()
    }
}
