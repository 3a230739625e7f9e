//! Where full-output logs go: a directory only this user can read, with old logs pruned.
//!
//! Owns: creating and checking the log directory, creating a log file, and the retention rules:
//! logs older than a week go, the directory stays within a byte budget (oldest logs first), and
//! no log eats into the disk's last free space.
//! Output can hold secrets, so a log directory that another user owns or can read is refused
//! rather than used. Must not touch: what goes into a log (`capture`).

use std::ffi::{CStr, CString};
use std::fs::{DirBuilder, File};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::dir::Dir;
use nix::fcntl::OFlag;
use nix::sys::stat::{fstatat, FileStat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};

/// Logs older than this are removed when a new log is written.
pub const KEEP_LOGS_FOR: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// The default log directory: `logs` in the agent's state directory (`$XDG_STATE_HOME/acp-bash`,
/// else `~/.local/state/acp-bash`), outside every place a command may write; under the temp dir
/// (per user) only when there is no state directory.
pub fn default_dir() -> PathBuf {
    let env = |name| std::env::var_os(name).map(PathBuf::from);
    if let Some(state) = crate::store::state_dir(
        None,
        env("XDG_STATE_HOME").as_deref(),
        env("HOME").as_deref(),
    ) {
        return state.join("logs");
    }
    // SAFETY: geteuid cannot fail and has no preconditions.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("acp-bash-logs-{uid}"))
}

/// An open log directory: every later step (pruning, making room, creating a log) is relative to
/// this descriptor, never to a path a command could change between a check and a use. The
/// directory itself was opened without following a symbolic link and checked through the
/// descriptor (a private directory of this user's).
#[derive(Debug)]
#[non_exhaustive]
pub struct LogDir {
    path: PathBuf,
    fd: OwnedFd,
}

impl LogDir {
    /// Makes `dir` (mode 0700) if needed, opens it (refusing a symbolic link), checks that it is
    /// a private directory of this user's, and removes logs in it older than [`KEEP_LOGS_FOR`].
    pub fn open(dir: &Path) -> Result<LogDir, String> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|error| {
                format!("cannot create the log directory {}: {error}", dir.display())
            })?;
        let refused = |problem: &str| {
            format!(
                "the log directory {} {problem}; output can hold secrets, so no log was written",
                dir.display()
            )
        };
        let path = CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| format!("the log directory {} has a NUL in its name", dir.display()))?;
        // SAFETY: open with a NUL-terminated path; the fd is ours.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let error = std::io::Error::last_os_error();
            return Err(match error.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                    refused("is not a directory (a symbolic link?)")
                }
                _ => format!("cannot open the log directory {}: {error}", dir.display()),
            });
        }
        // SAFETY: a new fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let meta = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|error| {
            format!(
                "cannot inspect the log directory {}: {error}",
                dir.display()
            )
        })?;
        // SAFETY: as above.
        let uid = unsafe { libc::geteuid() };
        if meta.st_uid != uid {
            return Err(refused("belongs to another user"));
        }
        if meta.st_mode & 0o077 != 0 {
            return Err(refused("can be read by other users (chmod 700 it)"));
        }
        let dir = LogDir {
            path: dir.to_path_buf(),
            fd,
        };
        dir.prune(SystemTime::now());
        Ok(dir)
    }

    /// The directory's path, as it was opened (for messages and the log's name in a result).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the new log `name` in this directory, readable only by this user: never through
    /// a symbolic link, never over an existing file.
    pub fn create_log(&self, name: &str) -> std::io::Result<File> {
        if name.contains('/') || name == "." || name == ".." {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a log's name is a single file name",
            ));
        }
        let name = CString::new(name)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: openat on our directory fd with a NUL-terminated name; the fd is ours.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600 as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a new fd we own.
        Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The logs here (`run-*.log` regular files, never following a link): name, mtime, size.
    fn logs(&self) -> Vec<(CString, SystemTime, u64)> {
        let raw: RawFd = self.fd.as_raw_fd();
        let Ok(mut dir) = Dir::openat(
            Some(raw),
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) else {
            return Vec::new();
        };
        dir.iter()
            .flatten()
            .filter(|entry| is_log(&entry.file_name().to_string_lossy()))
            .filter_map(|entry| {
                let name = entry.file_name().to_owned();
                let meta: FileStat = fstatat(
                    Some(raw),
                    name.as_c_str(),
                    nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                )
                .ok()?;
                if meta.st_mode & libc::S_IFMT != libc::S_IFREG {
                    return None;
                }
                let modified = SystemTime::UNIX_EPOCH
                    + Duration::new(meta.st_mtime.max(0) as u64, meta.st_mtime_nsec as u32);
                Some((name, modified, meta.st_size.max(0) as u64))
            })
            .collect()
    }

    fn remove(&self, name: &CStr) -> bool {
        unlinkat(Some(self.fd.as_raw_fd()), name, UnlinkatFlags::NoRemoveDir).is_ok()
    }

    /// Removes the oldest logs until the rest, plus a new log of up to `new_log` bytes, fit in
    /// `budget` bytes.
    pub fn make_room(&self, budget: u64, new_log: u64) {
        let mut logs = self.logs();
        logs.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        let mut total: u64 = logs.iter().map(|(_, _, len)| len).sum();
        let allowed = budget.saturating_sub(new_log.min(budget));
        for (name, _, len) in logs {
            if total <= allowed {
                break;
            }
            if self.remove(&name) {
                tracing::info!(log = %self.path.join(name.to_string_lossy().as_ref()).display(), "removed an old log to stay within the log budget");
                total -= len;
            }
        }
    }

    /// Removes logs last written more than [`KEEP_LOGS_FOR`] before `now`.
    fn prune(&self, now: SystemTime) {
        for (name, modified, _) in self.logs() {
            if now
                .duration_since(modified)
                .is_ok_and(|age| age > KEEP_LOGS_FOR)
            {
                self.remove(&name);
            }
        }
    }

    /// How many bytes a new log here may take without leaving the disk less than `reserve`
    /// free (`None`: [`default_reserve`]); an error that says so when there is no room at all.
    // statvfs's field types differ between targets: the casts are not always no-ops.
    #[allow(clippy::unnecessary_cast)]
    pub fn disk_room(&self, reserve: Option<u64>) -> Result<u64, String> {
        let Ok(stat) = nix::sys::statvfs::fstatvfs(&self.fd) else {
            // Not knowing is no reason to lose the log: the cap still bounds it.
            return Ok(u64::MAX);
        };
        room(
            &self.path,
            stat.fragment_size() as u64,
            stat.blocks_available() as u64,
            stat.blocks() as u64,
            reserve,
        )
    }
}

/// Makes and checks `dir` as [`LogDir::open`] does (and prunes it).
pub fn prepare(dir: &Path) -> Result<(), String> {
    LogDir::open(dir).map(drop)
}

/// Creates a new log file readable only by this user, at `path` (its directory opened without
/// following a link, then the file created relative to it, never through a link).
pub fn create_log(path: &Path) -> std::io::Result<File> {
    let invalid = || std::io::Error::from(std::io::ErrorKind::InvalidInput);
    let dir = path.parent().ok_or_else(invalid)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(invalid)?;
    let dir = LogDir::open(dir).map_err(std::io::Error::other)?;
    dir.create_log(name)
}

/// The free space a log never eats into when none is configured: 1 GiB, or 5% of the disk
/// when that is less (a small disk).
pub fn default_reserve(disk_bytes: u64) -> u64 {
    (disk_bytes / 20).min(1 << 30)
}

/// How many bytes a new log in `dir` may take without leaving the disk less than `reserve`
/// free (`None`: [`default_reserve`]); an error that says so when there is no room at all.
// statvfs's field types differ between targets: the casts are not always no-ops.
#[allow(clippy::unnecessary_cast)]
pub fn disk_room(dir: &Path, reserve: Option<u64>) -> Result<u64, String> {
    let Ok(stat) = nix::sys::statvfs::statvfs(dir) else {
        return Ok(u64::MAX);
    };
    room(
        dir,
        stat.fragment_size() as u64,
        stat.blocks_available() as u64,
        stat.blocks() as u64,
        reserve,
    )
}

fn room(
    dir: &Path,
    block: u64,
    available: u64,
    blocks: u64,
    reserve: Option<u64>,
) -> Result<u64, String> {
    let free = available.saturating_mul(block);
    let reserve = reserve.unwrap_or_else(|| default_reserve(blocks.saturating_mul(block)));
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
    if let Ok(dir) = LogDir::open(dir) {
        dir.make_room(budget, new_log);
    }
}

fn is_log(name: &str) -> bool {
    name.starts_with("run-") && name.ends_with(".log")
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
