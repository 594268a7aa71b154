//! The node's snapshot file: what `SAVE` and `BGSAVE` write and `LASTSAVE` reports.
//!
//! The session takes the database's RDB file as `SYNC` takes it, one read of the history on
//! this node (a primary's, or a backup's, linearizably), and the front end hands the file's
//! bytes here: [`Saver::save_now`] writes them before `SAVE` is answered, as Redis's `SAVE`
//! blocks its server until the file is on disk; [`Saver::save_in_background`] writes them on a
//! thread of its own, as `BGSAVE`'s child does, so the node goes on serving. Either writes a
//! temporary file beside the snapshot, syncs it, renames it over the snapshot and syncs the
//! directory: a crash leaves the old snapshot or the new one, never part of one.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tandem_redis::session::{SAVE_IN_PROGRESS, SaveFacts};

/// Where the node writes its snapshot, and what its snapshots did.
#[derive(Debug)]
pub struct Saver {
    path: PathBuf,
    facts: Arc<Mutex<SaveFacts>>,
}

impl Saver {
    /// A saver writing to `path`; `LASTSAVE` says the node's start until the first snapshot,
    /// as Redis's does.
    pub fn new(path: PathBuf) -> Saver {
        let facts = SaveFacts {
            last_save_unix: unix_now(),
            last_bgsave_seconds: -1,
            ..SaveFacts::default()
        };
        Saver {
            path,
            facts: Arc::new(Mutex::new(facts)),
        }
    }

    /// What the snapshots did so far.
    pub fn facts(&self) -> SaveFacts {
        *self.facts.lock().expect("never poisoned")
    }

    /// Writes `file` as the snapshot before returning (`SAVE`); the error is the client's
    /// reply, and the reason goes to the log.
    pub fn save_now(&self, file: &[u8]) -> Result<(), String> {
        if self.facts().in_progress {
            return Err(SAVE_IN_PROGRESS.to_owned());
        }
        let written = write_snapshot(&self.path, file);
        let mut facts = self.facts.lock().expect("never poisoned");
        record(&mut facts, &self.path, &written);
        written.map_err(|_| "ERR".to_owned())
    }

    /// Starts writing `file` as the snapshot on a thread of its own (`BGSAVE`); refused while
    /// another is being written.
    pub fn save_in_background(&self, file: Vec<u8>) -> Result<(), &'static str> {
        {
            let mut facts = self.facts.lock().expect("never poisoned");
            if facts.in_progress {
                return Err(SAVE_IN_PROGRESS);
            }
            facts.in_progress = true;
        }
        let path = self.path.clone();
        let shared = Arc::clone(&self.facts);
        let writer = move || {
            let started = Instant::now();
            let written = write_snapshot(&path, &file);
            let mut facts = shared.lock().expect("never poisoned");
            facts.in_progress = false;
            facts.last_bgsave_seconds = i64::try_from(started.elapsed().as_secs()).unwrap_or(0);
            record(&mut facts, &path, &written);
        };
        let spawned = std::thread::Builder::new()
            .name("bgsave".into())
            .spawn(writer);
        if let Err(err) = spawned {
            tracing::warn!("BGSAVE could not start its writer thread: {err}");
            let mut facts = self.facts.lock().expect("never poisoned");
            facts.in_progress = false;
            facts.last_failed = true;
            return Err("ERR");
        }
        Ok(())
    }
}

/// Counts a snapshot's outcome, logging it as Redis does.
fn record(facts: &mut SaveFacts, path: &Path, written: &std::io::Result<()>) {
    match written {
        Ok(()) => {
            facts.last_save_unix = unix_now();
            facts.last_failed = false;
            facts.saves += 1;
            tracing::info!("DB saved on disk: {}", path.display());
        }
        Err(err) => {
            facts.last_failed = true;
            tracing::warn!("Failed saving the DB to {}: {err}", path.display());
        }
    }
}

/// Writes `file` to a temporary file beside `path`, syncs it, renames it to `path` and syncs
/// the directory.
fn write_snapshot(path: &Path, file: &[u8]) -> std::io::Result<()> {
    let temporary = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = (|| {
        let mut out = std::fs::File::create(&temporary)?;
        out.write_all(file)?;
        out.sync_all()?;
        std::fs::rename(&temporary, path)?;
        if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tandem-saves-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    }

    #[test]
    fn a_save_replaces_the_snapshot_whole_and_counts() {
        let dir = scratch("now");
        let saver = Saver::new(dir.join("dump.rdb"));
        assert_eq!(saver.facts().saves, 0);
        saver.save_now(b"first").expect("written");
        saver.save_now(b"second file").expect("written");
        assert_eq!(
            std::fs::read(dir.join("dump.rdb")).expect("read"),
            b"second file"
        );
        let facts = saver.facts();
        assert_eq!((facts.saves, facts.last_failed), (2, false));
        let left: Vec<_> = std::fs::read_dir(&dir).expect("listed").collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_save_that_cannot_be_written_fails_and_says_so() {
        let dir = scratch("fail");
        let saver = Saver::new(dir.join("missing").join("dump.rdb"));
        assert_eq!(saver.save_now(b"file"), Err("ERR".to_owned()));
        assert!(saver.facts().last_failed);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_background_save_is_written_and_a_second_waits_for_it() {
        let dir = scratch("bg");
        let saver = Saver::new(dir.join("dump.rdb"));
        saver
            .save_in_background(b"background".to_vec())
            .expect("started");
        // While the first is written a second is refused; once it is done one starts again.
        let deadline = Instant::now() + std::time::Duration::from_secs(30);
        while saver.facts().in_progress {
            assert_eq!(saver.save_in_background(Vec::new()), Err(SAVE_IN_PROGRESS));
            assert!(Instant::now() < deadline, "the writer never finished");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(saver.facts().saves, 1);
        assert_eq!(
            std::fs::read(dir.join("dump.rdb")).expect("read"),
            b"background"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
