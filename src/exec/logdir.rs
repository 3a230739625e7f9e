//! Where full-output logs go: a directory only this user can read, with old logs pruned.
//!
//! Owns: creating and checking the log directory, creating a log file, and the retention rules:
//! logs older than a week go, the directory stays within a byte budget (oldest logs first), and
//! no log eats into the disk's last free space.
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

/// The free space a log never eats into when none is configured: 1 GiB, or 5% of the disk
/// when that is less (a small disk).
pub fn default_reserve(disk_bytes: u64) -> u64 {
    (disk_bytes / 20).min(1 << 30)
}

/// How many bytes a new log in `dir` may take without leaving the disk less than `reserve`
/// free (`None`: [`default_reserve`]); an error that says so when there is no room at all.
pub fn disk_room(dir: &Path, reserve: Option<u64>) -> Result<u64, String> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("the log directory {} has a NUL in its name", dir.display()))?;
    // SAFETY: statvfs writes into the zeroed struct we pass; the path is NUL-terminated.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        // Not knowing is no reason to lose the log: the cap still bounds it.
        return Ok(u64::MAX);
    }
    let block = stat.f_frsize as u64;
    let free = (stat.f_bavail as u64).saturating_mul(block);
    let reserve =
        reserve.unwrap_or_else(|| default_reserve((stat.f_blocks as u64).saturating_mul(block)));
    match free.checked_sub(reserve) {
        Some(room) if room > 0 => Ok(room),
        _ => Err(format!(
            "no log was written: the disk holding {} is nearly full ({} free; acp-bash leaves {} \
             free); free some space, or remove old logs from that directory",
            dir.display(),
            human(free),
            human(reserve)
        )),
    }
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b => format!("{b} bytes"),
    }
}

/// Removes the oldest `run-*.log` files in `dir` until the rest, plus a new log of up to
/// `new_log` bytes, fit in `budget` bytes.
pub fn make_room(dir: &Path, budget: u64, new_log: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut logs: Vec<(SystemTime, u64, PathBuf)> = entries
        .flatten()
        .filter(|entry| is_log(&entry.file_name().to_string_lossy()))
        .filter_map(|entry| {
            let meta = entry.metadata().ok()?;
            Some((meta.modified().ok()?, meta.len(), entry.path()))
        })
        .collect();
    logs.sort();
    let mut total: u64 = logs.iter().map(|(_, len, _)| len).sum();
    let allowed = budget.saturating_sub(new_log.min(budget));
    for (_, len, path) in logs {
        if total <= allowed {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            tracing::info!(log = %path.display(), "removed an old log to stay within the log budget");
            total -= len;
        }
    }
}

fn is_log(name: &str) -> bool {
    name.starts_with("run-") && name.ends_with(".log")
}

/// Removes `run-*.log` files last written more than [`KEEP_LOGS_FOR`] before `now`.
fn prune(dir: &Path, now: SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !is_log(&name) {
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
    fn the_oldest_logs_go_first_until_the_new_one_fits_the_budget() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("logs");
        prepare(&dir).unwrap();
        let now = SystemTime::now();
        for (name, age_secs) in [("run-a.log", 300), ("run-b.log", 200), ("run-c.log", 100)] {
            std::fs::write(dir.join(name), vec![b'x'; 1000]).unwrap();
            let file = File::options().write(true).open(dir.join(name)).unwrap();
            file.set_modified(now - Duration::from_secs(age_secs))
                .unwrap();
        }
        std::fs::write(dir.join("notes.txt"), vec![b'x'; 5000]).unwrap();
        // 3000 bytes of logs, a budget of 2500 with 1000 for the new log: a and b go.
        make_room(&dir, 2500, 1000);
        assert!(!dir.join("run-a.log").exists());
        assert!(!dir.join("run-b.log").exists());
        assert!(dir.join("run-c.log").exists());
        assert!(dir.join("notes.txt").exists(), "only logs are removed");
    }

    #[test]
    fn a_nearly_full_disk_gets_no_log_and_says_why() {
        let base = tempfile::tempdir().unwrap();
        let error = disk_room(base.path(), Some(u64::MAX)).unwrap_err();
        assert!(error.contains("is nearly full"), "{error}");
        assert!(disk_room(base.path(), Some(0)).unwrap() > 0);
        assert_eq!(default_reserve(100 << 30), 1 << 30);
        assert_eq!(default_reserve(10 << 30), (10 << 30) / 20);
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
