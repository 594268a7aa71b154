//! The node's data directories are its owner's alone.
//!
//! What a node writes to disk holds its data (the write-ahead log's segments and checkpoints)
//! or its cluster's membership (the config store's state): no other user of the machine may
//! list or read it. The files themselves are created 0600 by the crates that write them
//! (tandem-wal's `FsDisk`, tandem-config's `FileDurable`); this module makes sure the
//! directories they live in are 0700 before anything is opened: it creates a missing one
//! with that mode (whatever the umask), and tightens one that exists with bits for its group
//! or others, logging that it did, since an operator may have a reason to look.

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use crate::config::NodeConfig;

/// The mode of a directory that holds a node's data or secrets.
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// The bits of a mode that let the group or others in.
const SHARED_BITS: u32 = 0o077;

/// The bit of a directory everyone may write to but none may empty of others' files.
const STICKY_BIT: u32 = 0o1000;

/// What [`private_dir`] did to a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Made {
    /// It was missing: created (with any missing parent) with [`PRIVATE_DIR_MODE`].
    Created,
    /// It existed and was private already.
    Kept,
    /// It existed with bits for its group or others, which were taken away: the modes
    /// before and after (permission bits only).
    Tightened { from: u32, to: u32 },
    /// It existed open to others and is shared on purpose (the sticky bit, as `/tmp` has, or
    /// the root directory): left as it is, since closing it would lock other users out of
    /// what they keep there. Its mode.
    Shared { mode: u32 },
}

/// Makes `dir` a directory only its owner may enter: see [`Made`] for what it does. The
/// owner's own bits are left as they are, and a directory shared on purpose is not touched.
pub fn private_dir(dir: &Path) -> io::Result<Made> {
    match std::fs::metadata(dir) {
        Ok(metadata) if !metadata.is_dir() => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a directory", dir.display()),
        )),
        Ok(metadata) => {
            let from = metadata.permissions().mode() & 0o7777;
            if from & SHARED_BITS == 0 {
                return Ok(Made::Kept);
            }
            if from & STICKY_BIT != 0 || dir.parent().is_none() {
                return Ok(Made::Shared { mode: from });
            }
            let to = from & !SHARED_BITS;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(to))?;
            Ok(Made::Tightened { from, to })
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(PRIVATE_DIR_MODE)
                .create(dir)?;
            Ok(Made::Created)
        }
        Err(err) => Err(err),
    }
}

/// Before a node opens anything on disk: its config store's directory (`cluster.data_dir`)
/// and its write-ahead log's (`log.dir`, or its default) are made private. A directory that
/// cannot be created is an error naming its field; one whose mode cannot be tightened (owned
/// by another user, say) is logged with what to run, and the node starts all the same, as it
/// did before this check existed.
pub fn secure_data_dirs(config: &NodeConfig) -> Result<(), crate::StartError> {
    let mut dirs = Vec::new();
    if let Some(cluster) = &config.cluster {
        dirs.push(("cluster.data_dir", cluster.data_dir.clone()));
    }
    if let Some(log) = config.log_settings() {
        dirs.push(("log.dir", log.dir));
    }
    for (field, dir) in dirs {
        match private_dir(&dir) {
            Ok(Made::Tightened { from, to }) => tracing::warn!(
                "node {}: {field} {} was open to other users (mode {from:04o}); tightened it \
                 to {to:04o}: it holds the node's data",
                config.node_id,
                dir.display()
            ),
            Ok(Made::Shared { mode }) => tracing::warn!(
                "node {}: {field} {} is a directory shared with other users (mode {mode:04o}), \
                 left as it is; give the node a directory of its own",
                config.node_id,
                dir.display()
            ),
            Ok(Made::Created | Made::Kept) => {}
            Err(source) if source.kind() == io::ErrorKind::PermissionDenied => tracing::warn!(
                "node {}: {field} {} is open to other users and cannot be tightened ({source}); \
                 run `chmod 700 {}` as its owner",
                config.node_id,
                dir.display(),
                dir.display()
            ),
            Err(source) if field == "cluster.data_dir" => {
                return Err(crate::StartError::DataDir { path: dir, source });
            }
            Err(source) => {
                return Err(crate::StartError::Log(format!(
                    "log.dir: cannot create {}: {source}",
                    dir.display()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_missing_directory_is_made_private_and_an_open_one_is_tightened() {
        let base = std::env::temp_dir().join(format!("tandem-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("node1").join("log");
        assert_eq!(private_dir(&dir).unwrap(), Made::Created);
        assert_eq!(mode(&dir), PRIVATE_DIR_MODE);
        assert_eq!(mode(&base.join("node1")), PRIVATE_DIR_MODE);
        assert_eq!(private_dir(&dir).unwrap(), Made::Kept);

        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            private_dir(&dir).unwrap(),
            Made::Tightened {
                from: 0o755,
                to: 0o700
            }
        );
        assert_eq!(mode(&dir), 0o700);
        // The owner's own bits stay as they were.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o570)).unwrap();
        assert_eq!(
            private_dir(&dir).unwrap(),
            Made::Tightened {
                from: 0o570,
                to: 0o500
            }
        );
        // A shared directory (sticky, as /tmp) is left alone.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(private_dir(&dir).unwrap(), Made::Shared { mode: 0o1777 });
        assert_eq!(mode(&dir), 0o1777);
        assert!(matches!(
            private_dir(Path::new("/")).unwrap(),
            Made::Shared { .. } | Made::Kept
        ));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();

        let file = base.join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let err = private_dir(&file).unwrap_err();
        assert!(err.to_string().contains("not a directory"), "{err}");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
