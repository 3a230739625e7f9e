//! A pids cgroup of the agent's own per command, where the agent may create one (cgroup v1's
//! `pids` controller, writable: typically a root agent). It binds root, which RLIMIT_NPROC does
//! not. The child joins it first thing (writes `0` to `cgroup.procs` through an fd opened here).
//!
//! Layout: `<pids mount><agent's cgroup>/acp-bash-<pid>/run-<n>`. A run's folder can only be
//! removed once its processes are gone, so each new run removes the empty ones left behind.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The agent's own folder in the pids hierarchy, or why there is none.
fn base() -> &'static Result<PathBuf, String> {
    static BASE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BASE.get_or_init(|| {
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let path = own
            .lines()
            .filter_map(|line| {
                let mut parts = line.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                controllers
                    .split(',')
                    .any(|c| c == "pids")
                    .then(|| path.to_string())
            })
            .next()
            .ok_or(
                "no cgroup v1 `pids` controller here (cgroup v2 needs a delegated subtree, \
                    which acp-bash does not set up)",
            )?;
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
        let mount = mountinfo
            .lines()
            .find_map(|line| {
                let (left, right) = line.split_once(" - ")?;
                let mut fields = right.split(' ');
                let (fstype, _, options) = (fields.next()?, fields.next()?, fields.next()?);
                (fstype == "cgroup" && options.split(',').any(|o| o == "pids"))
                    .then(|| left.split(' ').nth(4).map(PathBuf::from))
                    .flatten()
            })
            .ok_or("the `pids` controller is not mounted")?;
        let parent = mount.join(path.trim_start_matches('/'));
        remove_abandoned(&parent);
        let dir = parent.join(format!("acp-bash-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(dir)
    })
}

/// Whether per-command pids cgroups work here (`Ok(where)`), or why not.
pub(crate) fn available() -> Result<String, String> {
    base().clone().map(|dir| {
        format!(
            "cgroup v1 pids controller: {}/run-N per command",
            dir.display()
        )
    })
}

/// A fresh cgroup for one command limited to `max` tasks: the fd of its `cgroup.procs`.
pub(crate) fn for_one_command(max: u64) -> Option<OwnedFd> {
    let base = base().as_ref().ok()?;
    static RUNS: AtomicU64 = AtomicU64::new(0);
    remove_finished(base, made_by_us());
    let dir = base.join(format!("run-{}", RUNS.fetch_add(1, Ordering::Relaxed)));
    let made = std::fs::create_dir(&dir)
        .and_then(|()| std::fs::write(dir.join("pids.max"), max.to_string()))
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
        });
    match made {
        Ok(file) => {
            if let Ok(mut made) = made_by_us().lock() {
                made.push((dir, std::time::Instant::now()));
            }
            Some(file.into())
        }
        Err(error) => {
            tracing::debug!(%error, dir = %dir.display(), "no pids cgroup for this command");
            let _ = std::fs::remove_dir(&dir);
            None
        }
    }
}

type Made = std::sync::Mutex<Vec<(PathBuf, std::time::Instant)>>;

/// The run folders this agent made, and when.
fn made_by_us() -> &'static Made {
    static MADE: OnceLock<Made> = OnceLock::new();
    MADE.get_or_init(Default::default)
}

/// Removes this agent's run folders whose processes are all gone (the kernel refuses busy
/// ones). Only folders older than a minute: a younger one may not have been joined yet.
fn remove_finished(_base: &Path, made: &Made) {
    let Ok(mut made) = made.lock() else {
        return;
    };
    made.retain(|(dir, at)| {
        at.elapsed() < std::time::Duration::from_secs(60) || std::fs::remove_dir(dir).is_err()
    });
}

/// Removes every run folder under `base` (an agent that is gone) that the kernel lets go.
fn remove_all_runs(base: &Path) {
    if let Ok(entries) = std::fs::read_dir(base) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with("run-") {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
}

/// Removes the folders of agents that are gone (empty ones only: the kernel refuses others).
fn remove_abandoned(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("acp-bash-")) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            remove_all_runs(&entry.path());
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}
