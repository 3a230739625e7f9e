//! Where full-output logs go: a directory only this user can read, with old logs pruned.
//!
//! Owns: creating and checking the log directory, creating a log file, and the retention rule.
//! Output can hold secrets, so a log directory that another user owns or can read is refused
//! rather than used. Must not touch: what goes into a log (`capture`).

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Logs older than this are removed when a new log is written.
pub const KEEP_LOGS_FOR: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The default log directory: per user, under the temp dir.
pub fn default_dir() -> PathBuf {
    // SAFETY: geteuid cannot fail and has no preconditions.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("acp-bash-logs-{uid}"))
}

/// Makes `dir` (mode 0700) if needed, checks that it is a private directory of this user's,
/// and removes logs in it older than [`KEEP_LOGS_FOR`].
pub fn prepare(dir: &Path) -> Result<(), String> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|error| format!("cannot create the log directory {}: {error}", dir.display()))?;
    let meta = std::fs::symlink_metadata(dir).map_err(|error| {
        format!(
            "cannot inspect the log directory {}: {error}",
            dir.display()
        )
    })?;
    // SAFETY: as above.
    let uid = unsafe { libc::geteuid() };
    let problem = if !meta.is_dir() {
        Some("is not a directory (a symbolic link?)")
    } else if meta.uid() != uid {
        Some("belongs to another user")
    } else if meta.mode() & 0o077 != 0 {
        Some("can be read by other users (chmod 700 it)")
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(format!(
            "the log directory {} {problem}; output can hold secrets, so no log was written",
            dir.display()
        ));
    }
    prune(dir, SystemTime::now());
    Ok(())
}

/// Creates a new log file readable only by this user.
pub fn create_log(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// Removes `run-*.log` files last written more than [`KEEP_LOGS_FOR`] before `now`.
fn prune(dir: &Path, now: SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("run-") && name.ends_with(".log")) {
            continue;
        }
        let modified = entry.metadata().and_then(|m| m.modified());
        let old =
            modified.is_ok_and(|at| now.duration_since(at).is_ok_and(|age| age > KEEP_LOGS_FOR));
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_directory_and_logs_are_private() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("logs");
        prepare(&dir).unwrap();
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let log = dir.join("run-1.log");
        create_log(&log).unwrap();
        assert_eq!(
            std::fs::metadata(&log).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn a_directory_others_can_read_is_refused_with_the_reason() {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let error = prepare(base.path()).unwrap_err();
        assert!(error.contains("can be read by other users"), "{error}");
    }

    #[test]
    fn logs_older_than_a_week_are_pruned_and_others_kept() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("logs");
        prepare(&dir).unwrap();
        let old = create_log(&dir.join("run-old.log")).unwrap();
        old.set_modified(SystemTime::now() - KEEP_LOGS_FOR - Duration::from_secs(60))
            .unwrap();
        create_log(&dir.join("run-new.log")).unwrap();
        std::fs::write(dir.join("notes.txt"), "not a log").unwrap();
        prepare(&dir).unwrap();
        assert!(!dir.join("run-old.log").exists());
        assert!(dir.join("run-new.log").exists());
        assert!(dir.join("notes.txt").exists());
    }
}
