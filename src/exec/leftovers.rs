//! What an agent leaves behind, and who removes it (`notes/2026-12-06-economy.md`): each
//! session's temp folder (`<root>/session-<pid>-<n>-<salt>`) and the sandbox's cgroup folders.
//!
//! - A session's folder goes when the session ends (on a thread of its own: a build's files
//!   can be many); [`leave`] waits for those removals, and removes the folders of sessions still
//!   open, when the program ends (EOF, or a termination signal once the commands are gone).
//! - An agent that was killed cannot: the next agent that starts removes them
//!   ([`remove_abandoned`]). Whether the agent that made a folder is gone is read from a lock,
//!   not from its pid alone (which another process may have by then, or which another PID
//!   namespace sharing the temp dir may use too): every agent with session folders under `root`
//!   holds a shared `flock` on `<root>/agent-<pid>.lock` for as long as it lives. A folder whose
//!   agent's lock can be taken exclusively (or, from an agent before these locks, whose pid is
//!   not running) is an abandoned one.

use std::collections::HashSet;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;

/// The folders of the sessions open now, and the removals of ended ones still running.
#[derive(Default)]
struct Folders {
    live: HashSet<PathBuf>,
    removing: Vec<JoinHandle<()>>,
}

fn folders() -> &'static Mutex<Folders> {
    static FOLDERS: OnceLock<Mutex<Folders>> = OnceLock::new();
    FOLDERS.get_or_init(Default::default)
}

/// This agent's lock file under each root it made session folders in, held (shared) while it
/// lives.
fn locks() -> &'static Mutex<Vec<(PathBuf, File)>> {
    static LOCKS: OnceLock<Mutex<Vec<(PathBuf, File)>>> = OnceLock::new();
    LOCKS.get_or_init(Default::default)
}

fn lock_file(root: &Path, pid: u32) -> PathBuf {
    root.join(format!("agent-{pid}.lock"))
}

/// Before a session folder is made under `root`: this agent holds its lock there (once per
/// root), so that no other agent takes its folders for abandoned ones.
pub(super) fn hold_lock(root: &Path) {
    let Ok(mut locks) = locks().lock() else {
        return;
    };
    if locks.iter().any(|(held, _)| held == root) {
        return;
    }
    let path = lock_file(root, std::process::id());
    // An agent that removes abandoned folders may unlink a lock file between our open and our
    // flock (the pid was a dead agent's before): then the file is made again.
    for _ in 0..3 {
        let Ok(file) = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
        else {
            return;
        };
        // SAFETY: flock on a file we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH) } != 0 {
            return;
        }
        let same = |a: &std::fs::Metadata, b: &std::fs::Metadata| {
            use std::os::unix::fs::MetadataExt;
            (a.dev(), a.ino()) == (b.dev(), b.ino())
        };
        if let (Ok(held), Ok(there)) = (file.metadata(), std::fs::metadata(&path)) {
            if same(&held, &there) {
                locks.push((root.to_path_buf(), file));
                return;
            }
        }
    }
}

/// A session folder was made.
pub(super) fn made(dir: &Path) {
    if let Ok(mut folders) = folders().lock() {
        folders.live.insert(dir.to_path_buf());
    }
}

/// A session ended: its folder is removed on a thread of its own, which [`leave`] waits for.
pub(super) fn session_ended(dir: PathBuf) {
    let Ok(mut folders) = folders().lock() else {
        return;
    };
    folders.live.remove(&dir);
    folders.removing.retain(|removal| !removal.is_finished());
    let removal = std::thread::Builder::new()
        .name("acp-bash-tmp-rm".into())
        .spawn(move || {
            if let Err(error) = crate::sandbox::remove_session_folder(&dir) {
                tracing::debug!(%error, dir = %dir.display(), "session temp folder");
            }
        });
    match removal {
        Ok(removal) => folders.removing.push(removal),
        Err(error) => tracing::debug!(%error, "no thread to remove the session temp folder"),
    }
}

/// Call once when the program that served sessions ends (after EOF, or after a termination
/// signal once its commands are gone): waits for the removal of ended sessions' temp folders,
/// removes those of sessions still open, and the sandbox's cgroup folders (`acp-bash serve` and
/// `acp-bash doctor` do; an embedder should too). Sessions used after this have no folder.
pub fn leave() {
    let (live, removing) = match folders().lock() {
        Ok(mut folders) => (
            folders.live.drain().collect::<Vec<_>>(),
            std::mem::take(&mut folders.removing),
        ),
        Err(_) => (Vec::new(), Vec::new()),
    };
    for dir in live {
        if let Err(error) = crate::sandbox::remove_session_folder(&dir) {
            tracing::debug!(%error, dir = %dir.display(), "session temp folder");
        }
    }
    for removal in removing {
        let _ = removal.join();
    }
    crate::sandbox::leave();
    if let Ok(mut locks) = locks().lock() {
        for (root, file) in locks.drain(..) {
            let _ = std::fs::remove_file(lock_file(&root, std::process::id()));
            drop(file);
        }
    }
}

/// Call once at start, off the path to the first answer: removes what agents that are gone
/// left behind: their session folders under `session_temp_root` (the engine's
/// [`super::EngineConfig::session_temp_root`]) and their empty cgroup folders. Nothing of an
/// agent that still runs is touched.
pub fn remove_abandoned(session_temp_root: Option<&Path>) {
    crate::sandbox::remove_abandoned();
    if let Some(root) = session_temp_root {
        remove_abandoned_sessions(root);
    }
}

/// The pid in a session folder's or lock file's name.
fn agent_pid(name: &str) -> Option<u32> {
    let rest = name
        .strip_prefix("session-")
        .or_else(|| name.strip_prefix("agent-"))?;
    let pid = rest.split(['-', '.']).next()?;
    pid.parse().ok()
}

fn remove_abandoned_sessions(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let own = std::process::id();
    let mut by_agent: std::collections::HashMap<u32, Vec<PathBuf>> = Default::default();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(agent_pid) else {
            continue;
        };
        if pid != own {
            by_agent.entry(pid).or_default().push(entry.path());
        }
    }
    for (pid, paths) in by_agent {
        let lock = lock_file(root, pid);
        let gone = match std::fs::OpenOptions::new().write(true).open(&lock) {
            // SAFETY: flock on a file we own; closed (unlocked) when `file` drops.
            Ok(file) => {
                let taken =
                    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
                taken.then_some(Some(file))
            }
            // No lock: an agent before them, or one that never made a folder here.
            Err(_) => (!Path::new("/proc").join(pid.to_string()).exists()).then_some(None),
        };
        let Some(held) = gone else {
            continue;
        };
        for path in paths.iter().filter(|p| p.as_path() != lock) {
            if let Err(error) = crate::sandbox::remove_session_folder(path) {
                tracing::debug!(%error, dir = %path.display(), "an abandoned session folder");
            }
        }
        if held.is_some() {
            let _ = std::fs::remove_file(&lock);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_is_read_from_a_folder_or_lock_name() {
        assert_eq!(agent_pid("session-123-0-ab12cd34"), Some(123));
        assert_eq!(agent_pid("agent-77.lock"), Some(77));
        assert_eq!(agent_pid("session-x-0"), None);
        assert_eq!(agent_pid("other-5"), None);
    }
}
