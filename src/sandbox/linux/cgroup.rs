//! cgroups of the agent's own per command, where the agent may create them (cgroup v1's `pids`
//! and `memory` controllers, writable: typically a root agent). They bind the command's whole
//! process tree and bind root, which RLIMIT_NPROC and RLIMIT_DATA do not. The child joins them
//! first thing (writes `0` to each one's `tasks` through an fd opened here).
//!
//! `tasks`, not `cgroup.procs`: the joining process has one thread (a raw fork), so moving that
//! thread moves the process, and a thread moving itself skips the kernel's system-wide
//! `cgroup_threadgroup_rwsem` write lock, whose RCU grace period made each `cgroup.procs` join
//! cost 7–15 ms here (about 0.15 ms through `tasks`): the whole of issue 24's late first output
//! (`notes/2026-12-01-first-output-cgroup-join.md`).
//!
//! Layout: `<controller mount><agent's cgroup>/acp-bash-<pid>/run-<n>`. A run's folder can only
//! be removed once its processes are gone, so each new run removes the empty ones left behind.
//! Where cgroup v1 has neither, `cgroup_v2.rs` serves the limits.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A cgroup v1 controller acp-bash limits commands with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Controller {
    /// `pids.max`: the number of tasks (`--max-processes`).
    Pids,
    /// `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes` where swap is accounted):
    /// the memory of the whole tree, page cache and tmpfs included (`--max-memory`).
    Memory,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
        }
    }

    /// The files that set the limit, in the order they must be written (memsw ≥ limit).
    fn limit_files(self) -> &'static [&'static str] {
        match self {
            Controller::Pids => &["pids.max"],
            Controller::Memory => &["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"],
        }
    }

    /// The agent's own folder in this controller's hierarchy, or why there is none.
    fn base(self) -> &'static Result<PathBuf, String> {
        static PIDS: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        static MEMORY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        let cell = match self {
            Controller::Pids => &PIDS,
            Controller::Memory => &MEMORY,
        };
        cell.get_or_init(|| own_folder(self.name()))
    }
}

/// Finds (and makes) `acp-bash-<pid>` under the agent's cgroup of `controller`.
fn own_folder(controller: &str) -> Result<PathBuf, String> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let path = own
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == controller)
                .then(|| path.to_string())
        })
        .next()
        .ok_or(format!("no cgroup v1 `{controller}` controller here"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mount = mountinfo
        .lines()
        .find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut fields = right.split(' ');
            let (fstype, _, options) = (fields.next()?, fields.next()?, fields.next()?);
            (fstype == "cgroup" && options.split(',').any(|o| o == controller))
                .then(|| left.split(' ').nth(4).map(PathBuf::from))
                .flatten()
        })
        .ok_or(format!("the `{controller}` controller is not mounted"))?;
    let parent = mount.join(path.trim_start_matches('/'));
    remove_abandoned(&parent);
    let dir = parent.join(format!("acp-bash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Whether per-command cgroups of `controller` work here (`Ok(where)`), or why not.
pub(crate) fn available(controller: Controller) -> Result<String, String> {
    controller.base().clone().map(|dir| {
        format!(
            "cgroup v1 {} controller: {}/run-N per command",
            controller.name(),
            dir.display()
        )
    })
}

/// A fresh cgroup of `controller` for one command, limited to `max` (tasks or bytes): the fd of
/// its `tasks` file (see the module doc for why not `cgroup.procs`). `None` (logged) when it
/// cannot be made; the RLIMIT still applies.
pub(crate) fn for_one_command(controller: Controller, max: u64) -> Option<OwnedFd> {
    let base = controller.base().as_ref().ok()?;
    remove_finished(made_by_us());
    // One spare per kind the commands ask for: taken here, made again by the spawner once it
    // is idle (`make_spares`).
    let spare = spares().lock().ok().and_then(|mut spares| {
        match spares
            .iter_mut()
            .find(|s| (s.controller, s.max) == (controller, max))
        {
            Some(spare) => spare.tasks.take(),
            None => {
                spares.push(Spare {
                    controller,
                    max,
                    tasks: None,
                });
                None
            }
        }
    });
    if let Some((dir, tasks)) = spare {
        if let Ok(mut made) = made_by_us().lock() {
            made.push((dir, std::time::Instant::now()));
        }
        return Some(tasks);
    }
    let (dir, made) = make(base, controller, max);
    match made {
        Ok(file) => {
            if let Ok(mut made) = made_by_us().lock() {
                made.push((dir, std::time::Instant::now()));
            }
            Some(file)
        }
        Err(error) => {
            tracing::debug!(%error, dir = %dir.display(), "no {} cgroup for this command", controller.name());
            let _ = std::fs::remove_dir(&dir);
            None
        }
    }
}

/// A cgroup made before its command, one per kind the last commands asked for: its folder and
/// its `tasks`, open for writing (`None`: wanted, not made yet). Only [`for_one_command`] takes
/// one, and only once: no two commands share one.
struct Spare {
    controller: Controller,
    max: u64,
    tasks: Option<(PathBuf, OwnedFd)>,
}

fn spares() -> &'static std::sync::Mutex<Vec<Spare>> {
    static SPARES: OnceLock<std::sync::Mutex<Vec<Spare>>> = OnceLock::new();
    SPARES.get_or_init(Default::default)
}

/// Makes the spare cgroups the last commands' kinds want (`for_one_command`): on the spawner
/// thread, once it has nothing to start, so that no command waits for the `mkdir`, the limit
/// and the `open` (about 70 µs) of its own.
pub(crate) fn make_spares() {
    let wanted: Vec<(Controller, u64)> = match spares().lock() {
        Ok(spares) => spares
            .iter()
            .filter(|s| s.tasks.is_none())
            .map(|s| (s.controller, s.max))
            .collect(),
        Err(_) => return,
    };
    for (controller, max) in wanted {
        let Ok(base) = controller.base() else {
            continue;
        };
        let (dir, made) = make(base, controller, max);
        let Ok(tasks) = made else {
            let _ = std::fs::remove_dir(&dir);
            continue;
        };
        let Ok(mut spares) = spares().lock() else {
            let _ = std::fs::remove_dir(&dir);
            return;
        };
        match spares
            .iter_mut()
            .find(|s| (s.controller, s.max) == (controller, max) && s.tasks.is_none())
        {
            Some(spare) => spare.tasks = Some((dir, tasks)),
            None => {
                drop(tasks);
                let _ = std::fs::remove_dir(&dir);
            }
        }
    }
}

/// A new cgroup for one command under `base`, with its limit: its folder, and its `tasks`
/// open for writing.
fn make(base: &Path, controller: Controller, max: u64) -> (PathBuf, std::io::Result<OwnedFd>) {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let dir = base.join(format!("run-{}", RUNS.fetch_add(1, Ordering::Relaxed)));
    let made = std::fs::create_dir(&dir)
        .and_then(|()| set_limit(&dir, controller, max))
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("tasks"))
        })
        .map(OwnedFd::from);
    (dir, made)
}

/// Writes `max` into each of the controller's limit files that this kernel has.
fn set_limit(dir: &Path, controller: Controller, max: u64) -> std::io::Result<()> {
    for (i, file) in controller.limit_files().iter().enumerate() {
        let path = dir.join(file);
        // Only the first file is required; memsw exists only where swap is accounted.
        if i > 0 && !path.exists() {
            continue;
        }
        std::fs::write(path, max.to_string())?;
    }
    Ok(())
}

type Made = std::sync::Mutex<Vec<(PathBuf, std::time::Instant)>>;

/// The run folders this agent made, and when.
fn made_by_us() -> &'static Made {
    static MADE: OnceLock<Made> = OnceLock::new();
    MADE.get_or_init(Default::default)
}

/// Removes this agent's run folders whose processes are all gone (the kernel refuses busy
/// ones). Only folders older than a minute: a younger one may not have been joined yet.
fn remove_finished(made: &Made) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the agent may make pids cgroups (root with cgroup v1 here): a command's cgroup is
    /// taken from the spare the spawner made (`make_spares`) once one was asked for, each is
    /// handed out once, and each has its limit.
    #[test]
    fn a_spare_cgroup_is_made_once_wanted_and_handed_out_once() {
        use std::os::fd::AsRawFd;
        if Controller::Pids.base().is_err() {
            return;
        }
        // A limit of this test's own: no other command of this process asks for it.
        let max = 4242;
        let first = for_one_command(Controller::Pids, max).expect("a cgroup");
        let spare = || {
            spares()
                .lock()
                .unwrap()
                .iter()
                .find(|s| (s.controller, s.max) == (Controller::Pids, max))
                .and_then(|s| s.tasks.as_ref().map(|(dir, _)| dir.clone()))
        };
        make_spares();
        let made = spare().expect("the spawner made one");
        assert_eq!(
            std::fs::read_to_string(made.join("pids.max"))
                .unwrap()
                .trim(),
            max.to_string()
        );
        let second = for_one_command(Controller::Pids, max).expect("a cgroup");
        let inode =
            |path: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap());
        let fd_inode =
            |fd: &OwnedFd| inode(Path::new(&format!("/proc/self/fd/{}", fd.as_raw_fd())));
        assert_eq!(
            fd_inode(&second),
            inode(&made.join("tasks")),
            "the spare was taken"
        );
        assert_ne!(
            fd_inode(&first),
            fd_inode(&second),
            "two commands, one cgroup"
        );
        assert_ne!(spare(), Some(made), "handed out twice");
    }

    /// A spare goes to the kind it was made for, even beside a kind whose cgroup cannot be
    /// made (a limit the kernel refuses): no command gets another limit than its own.
    #[test]
    fn a_spare_cgroup_keeps_to_its_own_limit() {
        if Controller::Pids.base().is_err() {
            return;
        }
        let refused = u64::MAX; // pids.max refuses it: this kind is wanted, never made
        assert!(for_one_command(Controller::Pids, refused).is_none());
        let max = 4245;
        let _first = for_one_command(Controller::Pids, max).expect("a cgroup");
        make_spares();
        let spares = spares().lock().unwrap();
        let slot = |max: u64| {
            spares
                .iter()
                .find(|s| (s.controller, s.max) == (Controller::Pids, max))
                .map(|s| s.tasks.as_ref().map(|(dir, _)| dir.clone()))
        };
        assert_eq!(
            slot(refused),
            Some(None),
            "nothing made for the refused limit"
        );
        let made = slot(max).flatten().expect("a spare for 4245");
        assert_eq!(
            std::fs::read_to_string(made.join("pids.max"))
                .unwrap()
                .trim(),
            max.to_string()
        );
    }
}
