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
//! be removed once its processes are gone: it is removed when its command ends ([`sweep`],
//! retried for a while where the kernel still counts a dying process), and whatever is left
//! when the agent ends ([`leave`], also on SIGTERM). An agent that was killed leaves its
//! folders behind; the next agent that starts removes them ([`remove_abandoned_everywhere`]):
//! only those of agents that are gone, and only empty ones (the kernel refuses the others).
//! Where cgroup v1 has neither controller, `cgroup_v2.rs` serves the limits.

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
        let cell = match self {
            Controller::Pids => &BASES.0,
            Controller::Memory => &BASES.1,
        };
        cell.get_or_init(|| own_folder(self.name()))
    }

    /// The agent's own folder, if this process made it (nothing is made here).
    fn made_base(self) -> Option<&'static PathBuf> {
        // `base` made it: its cell is set and `Ok`.
        let cell = match self {
            Controller::Pids => BASES.0.get(),
            Controller::Memory => BASES.1.get(),
        };
        cell.and_then(|made| made.as_ref().ok())
    }
}

/// A controller's folder of this agent's, or why there is none (made once).
type Base = OnceLock<Result<PathBuf, String>>;

/// Where `base` keeps each controller's answer (so that [`leave`] can ask without making one).
static BASES: (Base, Base) = (OnceLock::new(), OnceLock::new());

/// Finds (and makes) `acp-bash-<pid>` under the agent's cgroup of `controller`.
fn own_folder(controller: &str) -> Result<PathBuf, String> {
    let parent = parent_folder(controller)?;
    remove_abandoned(&parent);
    let dir = parent.join(format!("acp-bash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The agent's own cgroup of `controller` (cgroup v1), in which its `acp-bash-<pid>` folder
/// goes, or why there is none.
fn parent_folder(controller: &str) -> Result<PathBuf, String> {
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
    Ok(mount.join(path.trim_start_matches('/')))
}

/// Whether cgroup v1's `controller` serves per-command limits here (what [`available`] says,
/// without its text: asked before every command).
pub(crate) fn serves(controller: Controller) -> bool {
    controller.base().is_ok()
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

/// One command's cgroup: the fd of its `tasks` file, which the command's first process joins.
/// Dropped once the command is started (or will not be): its folder is then removed as soon as
/// its processes are gone ([`sweep`]).
pub(crate) struct RunCgroup {
    tasks: OwnedFd,
    dir: PathBuf,
}

impl RunCgroup {
    /// The `tasks` file's fd, for the command's plan.
    pub(crate) fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.tasks.as_raw_fd()
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        if let Ok(mut made) = made_by_us().lock() {
            made.push(std::mem::take(&mut self.dir));
        }
    }
}

/// A fresh cgroup of `controller` for one command, limited to `max` (tasks or bytes), with the
/// fd of its `tasks` file (see the module doc for why not `cgroup.procs`). `None` (logged) when
/// it cannot be made; the RLIMIT still applies.
pub(crate) fn for_one_command(controller: Controller, max: u64) -> Option<RunCgroup> {
    let base = controller.base().as_ref().ok()?;
    sweep();
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
        return Some(RunCgroup { tasks, dir });
    }
    let (dir, made) = make(base, controller, max);
    match made {
        Ok(tasks) => Some(RunCgroup { tasks, dir }),
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

type Made = std::sync::Mutex<Vec<PathBuf>>;

/// The run folders of commands that were started (or never will be), not removed yet.
fn made_by_us() -> &'static Made {
    static MADE: OnceLock<Made> = OnceLock::new();
    MADE.get_or_init(Default::default)
}

/// Whether any started command's folder waits to be removed.
pub(crate) fn any_to_remove() -> bool {
    made_by_us().lock().is_ok_and(|made| !made.is_empty())
}

/// Removes the run folders of started commands whose processes are all gone (the kernel
/// refuses busy ones): whether any is left.
pub(crate) fn sweep() -> bool {
    let Ok(mut made) = made_by_us().lock() else {
        return false;
    };
    made.retain(|dir| !removed(std::fs::remove_dir(dir)));
    !made.is_empty()
}

/// After a command ended: its folder goes now, or (its processes still being torn down, or
/// others running) on a thread that tries again for a minute, less and less often.
pub(crate) fn command_ended() {
    static RETRYING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !sweep() || RETRYING.swap(true, Ordering::AcqRel) {
        return;
    }
    let retry = std::thread::Builder::new()
        .name("acp-bash-cgroup-rm".into())
        .spawn(|| {
            let mut wait = std::time::Duration::from_millis(5);
            let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while std::time::Instant::now() < until {
                std::thread::sleep(wait);
                if !sweep() {
                    break;
                }
                wait = (wait * 2).min(std::time::Duration::from_secs(5));
            }
            RETRYING.store(false, Ordering::Release);
        });
    if retry.is_err() {
        RETRYING.store(false, Ordering::Release);
    }
}

/// When the agent ends (EOF, or a termination signal once its commands are gone): removes the
/// spare cgroups, every run folder and the agent's own `acp-bash-<pid>` folder, waiting up to
/// `patience` for processes the kernel still counts in them.
pub(crate) fn leave(patience: std::time::Duration) {
    if let Ok(mut spares) = spares().lock() {
        for spare in spares.drain(..) {
            if let Some((dir, tasks)) = spare.tasks {
                drop(tasks);
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
    let until = std::time::Instant::now() + patience;
    for controller in [Controller::Pids, Controller::Memory] {
        let Some(base) = controller.made_base() else {
            continue;
        };
        loop {
            sweep();
            remove_all_runs(base);
            let gone = removed(std::fs::remove_dir(base));
            if gone || std::time::Instant::now() >= until {
                if !gone {
                    tracing::debug!(dir = %base.display(), "a cgroup folder is still busy");
                }
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// At start: removes the folders that agents which are gone left under this agent's cgroups
/// (killed ones cannot remove their own), without making this agent's own.
pub(crate) fn remove_abandoned_everywhere() {
    for controller in [Controller::Pids, Controller::Memory] {
        if let Ok(parent) = parent_folder(controller.name()) {
            remove_abandoned(&parent);
        }
    }
}

/// Whether a removal left nothing there (done now, or gone already).
fn removed(result: std::io::Result<()>) -> bool {
    match result {
        Ok(()) => true,
        Err(error) => error.kind() == std::io::ErrorKind::NotFound,
    }
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

/// The tightest `pids.max` over this process's pids cgroup and its ancestors (cgroup v1's `pids`
/// controller, or the v2 hierarchy), when one is set: the limit a fork that fails with EAGAIN
/// has most likely reached.
pub(crate) fn own_pids_max() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // (v1: the line naming `pids`; v2: the `0::` line), and the mount that serves it.
    let (v2, path) = own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let v1 = controllers.split(',').any(|c| c == "pids");
        (v1 || (id == "0" && controllers.is_empty())).then(|| (!v1, path.to_string()))
    })?;
    let mount = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut fields = right.split(' ');
        let (fstype, _, options) = (fields.next()?, fields.next()?, fields.next()?);
        let serves = match v2 {
            true => fstype == "cgroup2",
            false => fstype == "cgroup" && options.split(',').any(|o| o == "pids"),
        };
        serves
            .then(|| left.split(' ').nth(4).map(PathBuf::from))
            .flatten()
    })?;
    let mut dir = mount.join(path.trim_start_matches('/'));
    let mut tightest: Option<u64> = None;
    while dir.starts_with(&mount) {
        let max = std::fs::read_to_string(dir.join("pids.max")).ok();
        if let Some(max) = max.and_then(|m| m.trim().parse::<u64>().ok()) {
            tightest = Some(tightest.map_or(max, |t| t.min(max)));
        }
        if !dir.pop() || dir == mount {
            break;
        }
    }
    tightest
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
            fd_inode(&second.tasks),
            inode(&made.join("tasks")),
            "the spare was taken"
        );
        assert_ne!(
            fd_inode(&first.tasks),
            fd_inode(&second.tasks),
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
