//! What the config store keeps across a crash, how it is encoded, and where it goes.
//!
//! The whole state is one small value, [`Persisted`]: Raft's hard state and membership, the
//! last snapshot of the map, and the log entries after it. The map is tiny and the log is
//! compacted every [`crate::SNAPSHOT_INTERVAL_ENTRIES`] applied entries, so every save writes
//! the whole value, and there is no log-structured format to recover.
//!
//! ```text
//! state image (FileDurable's file, MemDurable's bytes)
//!  0   8  magic      "TNDMCFG" then the format version byte, 0x03
//!  8   4  len        u32 LE, payload length
//! 12   4  crc        u32 LE, CRC32C of bytes 0..12 followed by the payload
//! 16   …  payload    postcard(Persisted): integers are LEB128 varints, a Vec or a map is its
//!                    varint length then its items, an Option is a 0/1 byte then the value
//! ```
//!
//! [`FileDurable`] keeps two slot files, `config.state.0` and `config.state.1`, and writes
//! each save over the slot that does not hold the last one, in place: one `fdatasync` of
//! blocks already allocated, no file created or renamed, so a save costs one device flush
//! and no journal commit (a view change waits for it on the failover path).
//!
//! ```text
//! slot file
//!  0   8  generation u64 LE: 1 for the first save, +1 per save
//!  8   4  crc        u32 LE, CRC32C of bytes 0..8
//! 12   …  state image (above), then zeros to the slot's allocated length
//! ```
//!
//! Crash points of a save: a save tears only the slot it writes; the other slot holds the
//! last completed save, whole. At open, the newest slot whose image checks out is the state;
//! a newer slot whose header checks out but whose image does not is the torn save (the
//! state before it stands). Anything else that does not check out (a header that does not,
//! or no slot that does) is reported as corrupt, naming the file: never taken for an empty
//! state, which could let the node vote twice in a term.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
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
    /// How many times this node started again from saved state: each start from a save
    /// takes the saved count plus one and saves it before it is used
    /// ([`crate::ConfigCore::incarnation`]), so no two lives of a node share one (format
    /// version 2).
    pub incarnation: u64,
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

/// Magic and format version of a state image: version 2 added the incarnation, version 3 a
/// view's `primary_sole_holder`, version 4 the map's slot table.
pub const STATE_MAGIC: [u8; 8] = *b"TNDMCFG\x04";
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

/// The runtime's disk: two slot files in a directory, written in turn (see the module
/// documentation).
#[derive(Debug)]
pub struct FileDurable {
    slots: [File; 2],
    paths: [PathBuf; 2],
    /// The generation of the last completed save (0: none).
    generation: u64,
    /// Bytes allocated to each slot file: a save that fits writes over allocated blocks.
    allocated: [u64; 2],
}

/// Bytes of a slot header.
const SLOT_HEADER_LEN: usize = 12;
/// A slot file is allocated in steps of this many bytes.
const SLOT_ALLOCATION_STEP: u64 = 64 * 1024;

/// What one slot file held at open.
enum Slot {
    /// No file, or an empty one: never written.
    Empty,
    /// A whole save.
    Good { generation: u64, state: Persisted },
    /// The header checks out but the image does not: a torn save, if it is the newest.
    Torn {
        generation: u64,
        error: CorruptState,
    },
    /// The header does not check out.
    Corrupt { reason: String },
}

impl FileDurable {
    pub const FILE_NAMES: [&'static str; 2] = ["config.state.0", "config.state.1"];
    /// The mode of the directories `open` creates: the owner's alone.
    pub const DIR_MODE: u32 = 0o700;
    /// The mode of the slot files `open` creates: read and write for the owner only.
    pub const FILE_MODE: u32 = 0o600;

    /// Opens (creating them if needed) the directory and its slot files and reads the state
    /// saved there: None on a node's first start. A corrupt slot is an `InvalidData` error
    /// naming the file; the operator decides (restore it, or wipe the node and let it rejoin),
    /// never this code.
    pub fn open(dir: impl AsRef<Path>) -> io::Result<(FileDurable, Option<Persisted>)> {
        let dir = dir.as_ref().to_path_buf();
        // The state names the cluster's members and views: the directory (and the parents
        // made for it) and the slot files are their owner's alone, whatever the umask. A
        // directory that exists keeps its mode (the node tightens it, and says so, first).
        fs::DirBuilder::new()
            .recursive(true)
            .mode(Self::DIR_MODE)
            .create(&dir)?;
        let paths = Self::FILE_NAMES.map(|name| dir.join(name));
        let mut slots = Vec::with_capacity(2);
        let mut found = Vec::with_capacity(2);
        let mut allocated = [0; 2];
        for (index, path) in paths.iter().enumerate() {
            let mut file = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(Self::FILE_MODE)
                .open(path)
                .map_err(|error| named(path, error))?;
            let mut bytes = Vec::new();
            io::Read::read_to_end(&mut file, &mut bytes).map_err(|error| named(path, error))?;
            allocated[index] = bytes.len() as u64;
            found.push(read_slot(&bytes));
            slots.push(file);
        }
        // Both slot files exist now: their directory entries must survive a crash before a
        // save in them can.
        File::open(&dir)?.sync_all()?;
        let corrupt = |index: usize, reason: String| {
            let message = format!(
                "{} is corrupt: {reason}; restore it from a backup or wipe this node's config \
                 directory so it rejoins",
                paths[index].display()
            );
            io::Error::new(io::ErrorKind::InvalidData, message)
        };
        let (state, generation) = match (&found[0], &found[1]) {
            (Slot::Corrupt { reason }, _) => return Err(corrupt(0, reason.clone())),
            (_, Slot::Corrupt { reason }) => return Err(corrupt(1, reason.clone())),
            (Slot::Empty, Slot::Empty) => (legacy_state(&dir)?, 0),
            (Slot::Good { generation: a, .. }, Slot::Good { generation: b, .. }) => {
                let newest = if a > b { 0 } else { 1 };
                let Slot::Good { generation, state } = &found[newest] else {
                    unreachable!("both good")
                };
                (Some(state.clone()), *generation)
            }
            (Slot::Good { generation, state }, other)
            | (other, Slot::Good { generation, state }) => {
                let torn_index = usize::from(matches!(found[0], Slot::Good { .. }));
                match other {
                    Slot::Empty => {}
                    Slot::Torn {
                        generation: torn, ..
                    } if torn > generation => {}
                    Slot::Torn { error, .. } => return Err(corrupt(torn_index, error.to_string())),
                    Slot::Good { .. } | Slot::Corrupt { .. } => unreachable!("matched above"),
                }
                (Some(state.clone()), *generation)
            }
            (Slot::Torn { error, .. }, _) => return Err(corrupt(0, error.to_string())),
            (_, Slot::Torn { error, .. }) => return Err(corrupt(1, error.to_string())),
        };
        let slots: [File; 2] = slots.try_into().expect("two slots");
        let durable = FileDurable {
            slots,
            paths,
            generation,
            allocated,
        };
        Ok((durable, state))
    }

    /// The slot file the last completed save went to (the first slot before any save).
    pub fn path(&self) -> &Path {
        &self.paths[(self.generation.max(1) - 1) as usize % 2]
    }
}

/// The state an earlier version saved in one file, `config.state` (written whole and renamed
/// into place), read once when no slot has been written: the next save goes to a slot.
fn legacy_state(dir: &Path) -> io::Result<Option<Persisted>> {
    let path = dir.join("config.state");
    let image = match fs::read(&path) {
        Ok(image) => image,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(named(&path, error)),
    };
    Persisted::decode(&image).map(Some).map_err(|error| {
        let message = format!(
            "{} is corrupt: {error}; restore it from a backup or wipe this node's config \
             directory so it rejoins",
            path.display()
        );
        io::Error::new(io::ErrorKind::InvalidData, message)
    })
}

fn named(path: &Path, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

fn read_slot(bytes: &[u8]) -> Slot {
    if bytes.iter().all(|&byte| byte == 0) {
        return Slot::Empty;
    }
    if bytes.len() < SLOT_HEADER_LEN {
        return Slot::Corrupt {
            reason: format!("{} bytes, shorter than a slot header", bytes.len()),
        };
    }
    let generation = u64::from_le_bytes(bytes[0..8].try_into().expect("8 bytes"));
    let stored = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(&bytes[0..8]);
    if stored != computed || generation == 0 {
        return Slot::Corrupt {
            reason: format!(
                "slot header checksum {stored:#010x}, computed {computed:#010x} (generation \
                 {generation})"
            ),
        };
    }
    let image = &bytes[SLOT_HEADER_LEN..];
    // The image says its own length; the rest of the slot is padding.
    let image = match image.get(8..12) {
        Some(len) => {
            let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
            &image[..(HEADER_LEN + len).min(image.len())]
        }
        None => image,
    };
    match Persisted::decode(image) {
        Ok(state) => Slot::Good { generation, state },
        Err(error) => Slot::Torn { generation, error },
    }
}

impl Durable for FileDurable {
    fn save(&mut self, state: &Persisted) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let generation = self.generation + 1;
        let index = ((generation - 1) % 2) as usize;
        let mut slot = Vec::with_capacity(SLOT_HEADER_LEN + 256);
        slot.extend_from_slice(&generation.to_le_bytes());
        slot.extend_from_slice(&crc32c::crc32c(&generation.to_le_bytes()).to_le_bytes());
        slot.extend_from_slice(&state.encode());
        let file = &self.slots[index];
        if slot.len() as u64 > self.allocated[index] {
            // Growing the file changes its metadata: allocate a step ahead, zeroed, and sync
            // it whole, so that the saves after this one overwrite allocated blocks only.
            let len = (slot.len() as u64).div_ceil(SLOT_ALLOCATION_STEP) * SLOT_ALLOCATION_STEP;
            file.set_len(len)?;
            file.write_all_at(&slot, 0)?;
            file.sync_all()?;
            self.allocated[index] = len;
        } else {
            // Bytes a longer earlier save left after the image stay: the image says its
            // own length.
            file.write_all_at(&slot, 0)?;
            file.sync_data()?;
        }
        self.generation = generation;
        Ok(())
    }
}
