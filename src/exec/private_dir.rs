//! The engine's private directory: `$TMPDIR/acp-bash-<pid>-<n>`, mode 0700, holding the prelude,
//! the files it sources and the per-run cwd files. Removed when the engine is dropped; the
//! directories of agents that could not remove their own (killed with SIGKILL) are removed by
//! the next agent ([`remove_abandoned`]).
//!
//! Owns: creating, locking and removing those directories. Must not touch: what goes in them
//! (the prelude module writes its files).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::prelude;

/// The name every private directory starts with.
const PREFIX: &str = "acp-bash-";

/// Held (`flock`, exclusive) by the live agent that owns the directory.
const LOCK_FILE: &str = "lock";

/// A directory younger than this is never taken for abandoned: it may be one whose owner has not
/// locked it yet.
const MIN_AGE: Duration = Duration::from_secs(60);

/// A directory only this process's user can enter, removed when the engine is dropped.
pub(super) struct PrivateDir {
    pub path: PathBuf,
    pub prelude: PathBuf,
    /// Locked for as long as this engine lives: tells other agents the directory is in use.
    _lock: File,
}

impl PrivateDir {
    pub fn create() -> Result<PrivateDir, String> {
        let path = std::env::temp_dir().join(format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            unique_suffix()
        ));
        let made = std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .and_then(|()| {
                let lock = File::create_new(path.join(LOCK_FILE))?;
                flock(&lock, libc::LOCK_EX | libc::LOCK_NB)?;
                Ok((lock, prelude::install(&path)?))
            });
        match made {
            Ok((lock, prelude)) => Ok(PrivateDir {
                path,
                prelude,
                _lock: lock,
            }),
            Err(error) => {
                let _ = std::fs::remove_dir_all(&path);
                Err(format!(
                    "acp-bash could not create its private directory {}: {error}; set TMPDIR to a writable directory",
                    path.display()
                ))
            }
        }
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn unique_suffix() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

fn flock(file: &File, operation: libc::c_int) -> std::io::Result<()> {
    // SAFETY: flock on an fd we own.
    if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Removes the private directories in `temp` that belong to this user, are at least a minute old
/// and whose lock nobody holds: their agent is gone without cleaning up. The lock, not the pid in
/// the name, decides (an agent in another PID namespace may share the temp dir). Returns how many
/// it removed.
pub(super) fn remove_abandoned(temp: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return 0;
    };
    // SAFETY: plain getter.
    let uid = unsafe { libc::geteuid() };
    let now = SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let ours = rest
            .split_once('-')
            .is_some_and(|(pid, n)| is_number(pid) && is_number(n));
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|modified| now.duration_since(modified).ok())
            .is_some_and(|age| age >= MIN_AGE);
        if !ours || !meta.is_dir() || meta.uid() != uid || !old {
            continue;
        }
        let Ok(lock) = File::open(entry.path().join(LOCK_FILE)) else {
            continue; // not ours to judge (no lock file: not made by this version)
        };
        if flock(&lock, libc::LOCK_EX | libc::LOCK_NB).is_ok()
            && std::fs::remove_dir_all(entry.path()).is_ok()
        {
            tracing::debug!(dir = %entry.path().display(), "removed an abandoned private directory");
            removed += 1;
        }
    }
    removed
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets `path`'s modification time `age` in the past.
    fn age(path: &Path, age: Duration) {
        let then = SystemTime::now() - age;
        let file = File::open(path).unwrap();
        file.set_modified(then).unwrap();
    }

    fn private_dir(temp: &Path, name: &str, locked_by_us: bool) -> (PathBuf, Option<File>) {
        let dir = temp.join(name);
        std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        let lock = File::create(dir.join(LOCK_FILE)).unwrap();
        std::fs::write(dir.join("prelude.bash"), "").unwrap();
        let held = locked_by_us.then(|| {
            // A lock held through another open file description, as another agent holds it.
            let other = File::open(dir.join(LOCK_FILE)).unwrap();
            flock(&other, libc::LOCK_EX | libc::LOCK_NB).unwrap();
            other
        });
        drop(lock);
        age(&dir, Duration::from_secs(3600));
        (dir, held)
    }

    #[test]
    fn only_old_unlocked_private_directories_are_removed() {
        let temp = tempfile::tempdir().unwrap();
        let (abandoned, _) = private_dir(temp.path(), "acp-bash-4242-1", false);
        let (alive, _held) = private_dir(temp.path(), "acp-bash-4243-2", true);
        let (young, _) = private_dir(temp.path(), "acp-bash-4244-3", false);
        age(&young, Duration::from_secs(1));
        let (other_name, _) = private_dir(temp.path(), "acp-bash-logs-0", false);
        let no_lock = temp.path().join("acp-bash-4245-4");
        std::fs::create_dir(&no_lock).unwrap();
        age(&no_lock, Duration::from_secs(3600));

        assert_eq!(remove_abandoned(temp.path()), 1);
        assert!(!abandoned.exists(), "its agent is gone: removed");
        assert!(alive.exists(), "its lock is held: in use");
        assert!(young.exists(), "may not be locked yet");
        assert!(other_name.exists(), "not a private directory's name");
        assert!(no_lock.exists(), "not made by this version: left alone");
    }

    #[test]
    fn a_live_engines_directory_is_locked_and_goes_with_it() {
        let dir = PrivateDir::create().unwrap();
        let path = dir.path.clone();
        let probe = File::open(path.join(LOCK_FILE)).unwrap();
        assert_eq!(
            flock(&probe, libc::LOCK_EX | libc::LOCK_NB)
                .unwrap_err()
                .raw_os_error(),
            Some(libc::EWOULDBLOCK)
        );
        drop(dir);
        assert!(!path.exists());
    }
}
