//! cgroup v2 limits per command (`--max-processes`: `pids.max`, `--max-memory`: `memory.max`),
//! where cgroup v1 has no `pids` / `memory` hierarchy the agent may write (`cgroup.rs` first).
//!
//! The subtree: the agent's own cgroup when the agent is alone in it and may write it (a
//! container's, a service's), else a transient scope with `Delegate=yes` from systemd
//! (`systemd_scope.rs`: the system manager for root, the user manager for anyone else). Set up
//! lazily, at the first command that asks for a limit (never at `initialize`):
//!
//! ```text
//! <subtree>/                  cgroup.subtree_control: +pids +memory (those delegated)
//!   agent/                    the agent moves itself here ("no internal processes")
//!   run-N/                    one per command: pids.max; cgroup.subtree_control +memory
//!     init/                   W and I (forks of the agent: their resident size is the agent's)
//!     shell/                  B and everything it starts: memory.max, memory.swap.max 0
//! ```
//!
//! W is forked straight into `init/` and B into `shell/` (`clone3` with `CLONE_INTO_CGROUP`,
//! Linux 5.7) where the kernel allows it; a migration through `cgroup.procs` takes the
//! system-wide `cgroup_threadgroup_rwsem` for writing (milliseconds). Elsewhere (an older kernel,
//! the zygote's commands) they join `cgroup.procs` as v1 joins `tasks`.
//!
//! Clean-up: a run's folders go when its command has been waited for (or, while something of it
//! lingers, at a later command, at a session's end and at the agent's end, which kills what is
//! left through `cgroup.kill`); at the agent's end (EOF or SIGTERM/SIGINT/SIGHUP: `release`)
//! the agent moves back out of `agent/` and removes it. systemd removes the scope once the agent
//! is gone.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use super::child::sys;

/// The agent's delegated subtree (`set_up`).
struct Subtree {
    /// The delegated folder.
    dir: PathBuf,
    /// `dir/agent`, where the agent moved itself.
    leaf: PathBuf,
    /// The systemd scope `dir` is, if the agent asked for one.
    scope: Option<String>,
    /// Which controllers `dir/cgroup.subtree_control` enables.
    pids: bool,
    memory: bool,
    /// `clone3(CLONE_INTO_CGROUP)` works here.
    clone_into: bool,
}

static SUBTREE: OnceLock<Result<Subtree, String>> = OnceLock::new();

/// The subtree, set up at the first call (blocking: a D-Bus round trip to systemd).
fn subtree() -> &'static Result<Subtree, String> {
    SUBTREE.get_or_init(|| {
        let made = set_up();
        match &made {
            Ok(s) => tracing::info!(dir = %s.dir.display(), clone_into = s.clone_into, "cgroup v2 subtree for per-command limits"),
            Err(error) => tracing::info!(%error, "no cgroup v2 subtree for per-command limits"),
        }
        made
    })
}

/// The cgroup v2 hierarchy's mount and this process's folder in it.
struct Hierarchy {
    mount: PathBuf,
    own: PathBuf,
    /// The controllers the hierarchy has (its root's `cgroup.controllers`).
    pids: bool,
    memory: bool,
}

fn hierarchy() -> Result<Hierarchy, String> {
    let own = own_path()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mount = mountinfo
        .lines()
        .find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            (right.split(' ').next()? == "cgroup2")
                .then(|| left.split(' ').nth(4).map(PathBuf::from))?
        })
        .ok_or("no cgroup v2 hierarchy is mounted here")?;
    let controllers = std::fs::read_to_string(mount.join("cgroup.controllers")).unwrap_or_default();
    let has = |name: &str| controllers.split_whitespace().any(|c| c == name);
    let (pids, memory) = (has("pids"), has("memory"));
    if !pids && !memory {
        return Err(
            "the cgroup v2 hierarchy here has neither the pids nor the memory controller (they are on cgroup v1)"
                .to_string(),
        );
    }
    Ok(Hierarchy {
        own: mount.join(own.trim_start_matches('/')),
        mount,
        pids,
        memory,
    })
}

/// This process's cgroup v2 path (`0::/…` in `/proc/self/cgroup`).
fn own_path() -> Result<String, String> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    own.lines()
        .find_map(|line| line.strip_prefix("0::").map(str::to_string))
        .ok_or_else(|| "this process is in no cgroup v2 hierarchy".to_string())
}

/// Whether this process is the only one in `dir` and may write its `cgroup.subtree_control`.
fn alone_in(dir: &Path) -> bool {
    let me = std::process::id().to_string();
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    let writable = |file: &str| {
        std::ffi::CString::new(dir.join(file).into_os_string().into_encoded_bytes())
            // SAFETY: access on a valid C string.
            .is_ok_and(|path| unsafe { libc::access(path.as_ptr(), libc::W_OK) } == 0)
    };
    procs.lines().eq([me.as_str()])
        && writable("cgroup.subtree_control")
        && writable("cgroup.procs")
}

fn set_up() -> Result<Subtree, String> {
    let hierarchy = hierarchy()?;
    let pid = std::process::id();
    let (dir, scope) = if alone_in(&hierarchy.own) {
        (hierarchy.own.clone(), None)
    } else {
        let name = format!("acp-bash-{pid}.scope");
        // SAFETY: plain getter.
        let system = unsafe { libc::geteuid() } == 0;
        super::systemd_scope::start_delegated_scope(&name, pid, system).map_err(|why| {
            format!(
                "the agent's cgroup is shared, and asking the systemd {} manager for a delegated scope failed: {why}",
                if system { "system" } else { "user" }
            )
        })?;
        let now = own_path()?;
        if !now.ends_with(&format!("/{name}")) {
            return Err(format!("systemd made {name}, but the agent is in {now}"));
        }
        (
            hierarchy.mount.join(now.trim_start_matches('/')),
            Some(name),
        )
    };
    let delegated = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    let has = |name: &str| delegated.split_whitespace().any(|c| c == name);
    let (pids, memory) = (
        hierarchy.pids && has("pids"),
        hierarchy.memory && has("memory"),
    );
    if !pids && !memory {
        return Err(format!(
            "{} has neither the pids nor the memory controller (not delegated)",
            dir.display()
        ));
    }
    let leaf = dir.join("agent");
    let moved = std::fs::create_dir(&leaf)
        .and_then(|()| std::fs::write(leaf.join("cgroup.procs"), pid.to_string()));
    if let Err(error) = moved {
        let _ = std::fs::remove_dir(&leaf);
        return Err(format!(
            "cannot move the agent into {}: {error}",
            leaf.display()
        ));
    }
    let enable = [(pids, "+pids"), (memory, "+memory")]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, c)| *c)
        .collect::<Vec<_>>()
        .join(" ");
    if let Err(error) = std::fs::write(dir.join("cgroup.subtree_control"), &enable) {
        // EBUSY: a process still sits in `dir` itself ("no internal processes"): name them.
        let left = processes_in(&dir);
        leave(&dir, &leaf);
        return Err(format!(
            "cannot enable {enable} in {}: {error}{}",
            dir.join("cgroup.subtree_control").display(),
            if left.is_empty() {
                String::new()
            } else {
                format!(" (processes still in {}: {left})", dir.display())
            }
        ));
    }
    let clone_into =
        std::fs::File::open(&leaf).is_ok_and(|folder| sys::clone_into_works(folder.as_raw_fd()));
    Ok(Subtree {
        dir,
        leaf,
        scope,
        pids,
        memory,
        clone_into,
    })
}

/// The processes in `dir` itself (not its children), as `pid (name)`, for an error message.
fn processes_in(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .map(|pid| {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            format!("{pid} ({})", name.trim())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Moves the agent from `leaf` back into `dir` (controllers off first: "no internal
/// processes") and removes `leaf`.
fn leave(dir: &Path, leaf: &Path) {
    let _ = std::fs::write(dir.join("cgroup.subtree_control"), "-pids -memory");
    let _ = std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string());
    let _ = std::fs::remove_dir(leaf);
}

/// Whether the subtree may be set up here without trying (no D-Bus, no folder): for a mode's
/// description before the first command. `Ok(how)` once it is set up.
pub(crate) fn available(pids: bool) -> Result<String, String> {
    let what = if pids { "pids.max" } else { "memory.max" };
    match SUBTREE.get() {
        Some(Ok(s)) => {
            let on = if pids { s.pids } else { s.memory };
            if !on {
                return Err(format!(
                    "the {} controller is not delegated to {}",
                    if pids { "pids" } else { "memory" },
                    s.dir.display()
                ));
            }
            Ok(format!(
                "cgroup v2 {what} per command in {}/run-N ({}; {})",
                s.dir.display(),
                match &s.scope {
                    Some(scope) => format!("a delegated systemd scope, {scope}"),
                    None => "the agent's own cgroup".to_string(),
                },
                if s.clone_into {
                    "joined at fork by clone3"
                } else {
                    "joined through cgroup.procs: clone3(CLONE_INTO_CGROUP) fails here"
                }
            ))
        }
        Some(Err(why)) => Err(why.clone()),
        None => {
            let h = hierarchy()?;
            if !(if pids { h.pids } else { h.memory }) {
                return Err(format!(
                    "the cgroup v2 hierarchy here has no {} controller",
                    if pids { "pids" } else { "memory" }
                ));
            }
            // SAFETY: plain getter.
            let root = unsafe { libc::geteuid() } == 0;
            if alone_in(&h.own) || super::systemd_scope::bus_socket(root).is_some() {
                Ok(format!(
                    "cgroup v2 {what} per command, in a delegated subtree set up at the first command with a limit (not tried yet; `acp-bash doctor` tries it)"
                ))
            } else {
                Err(format!(
                    "the agent's cgroup v2 folder is shared and there is no systemd {} bus to ask for a delegated scope",
                    if root { "system" } else { "user" }
                ))
            }
        }
    }
}

/// Sets the subtree up now (`doctor`), where it was not tried yet.
pub(crate) fn set_up_now() {
    let _ = subtree();
}

/// A command's folders: kept open until it has started, removed once it has ended.
pub(crate) struct Run {
    dir: PathBuf,
    /// `init/` and `shell/`, open for `clone3` (where it works).
    pub(crate) init_dir: Option<OwnedFd>,
    pub(crate) shell_dir: Option<OwnedFd>,
    /// `init/cgroup.procs` and `shell/cgroup.procs`, open for writing (the zygote's commands,
    /// and where `clone3` fails).
    pub(crate) init_procs: OwnedFd,
    pub(crate) shell_procs: OwnedFd,
    started: AtomicBool,
}

impl Run {
    /// The command started as `pid`: its folders are removed once it has been waited for
    /// ([`ended`]).
    pub(crate) fn started(&self, pid: i32) {
        self.started.store(true, Ordering::Relaxed);
        if let Ok(mut running) = running().lock() {
            running.push((pid, self.dir.clone()));
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if !self.started.load(Ordering::Relaxed) {
            remove_or_keep(self.dir.clone());
        }
    }
}

fn running() -> &'static Mutex<Vec<(i32, PathBuf)>> {
    static RUNNING: OnceLock<Mutex<Vec<(i32, PathBuf)>>> = OnceLock::new();
    RUNNING.get_or_init(Default::default)
}

/// Run folders something still lingers in (removed at a later command, at a session's end or
/// at the agent's end).
fn lingering() -> &'static Mutex<Vec<PathBuf>> {
    static LINGERING: OnceLock<Mutex<Vec<PathBuf>>> = OnceLock::new();
    LINGERING.get_or_init(Default::default)
}

fn remove_run(dir: &Path) -> bool {
    let _ = std::fs::remove_dir(dir.join("shell"));
    let _ = std::fs::remove_dir(dir.join("init"));
    std::fs::remove_dir(dir).is_ok() || !dir.exists()
}

fn remove_or_keep(dir: PathBuf) {
    if !remove_run(&dir) {
        if let Ok(mut lingering) = lingering().lock() {
            lingering.push(dir);
        }
    }
}

/// The command started as `pid` has been waited for: its folders go (or wait in [`lingering`]
/// while a background process of it lingers).
pub(crate) fn ended(pid: i32) {
    let dir = running().lock().ok().and_then(|mut running| {
        let at = running.iter().position(|(p, _)| *p == pid)?;
        Some(running.swap_remove(at).1)
    });
    if let Some(dir) = dir {
        remove_or_keep(dir);
    }
}

/// Removes the lingering run folders that have emptied.
pub(crate) fn sweep() {
    if let Ok(mut lingering) = lingering().lock() {
        lingering.retain(|dir| !remove_run(dir));
    }
}

/// A command's folders under the subtree, with `max_processes` and `max_memory` (each where
/// asked and delegated); `None` (logged) where there is no subtree or they cannot be made.
pub(crate) fn for_one_command(max_processes: Option<u64>, max_memory: Option<u64>) -> Option<Run> {
    if max_processes.is_none() && max_memory.is_none() {
        return None;
    }
    let Ok(subtree) = subtree() else {
        return None;
    };
    sweep();
    let kind = (
        max_processes.filter(|_| subtree.pids),
        max_memory.filter(|_| subtree.memory),
    );
    if kind == (None, None) {
        return None;
    }
    let spare = spares().lock().ok().and_then(|mut spares| {
        match spares.iter_mut().find(|s| s.kind == kind) {
            Some(spare) => spare.run.take(),
            None => {
                spares.push(Spare { kind, run: None });
                None
            }
        }
    });
    if spare.is_some() {
        return spare;
    }
    match make(subtree, kind) {
        Ok(run) => Some(run),
        Err(error) => {
            tracing::debug!(%error, "no cgroup v2 folder for this command");
            None
        }
    }
}

/// A run made before its command, one per kind (limits) the last commands asked for (`None`:
/// wanted, not made yet).
struct Spare {
    kind: (Option<u64>, Option<u64>),
    run: Option<Run>,
}

fn spares() -> &'static Mutex<Vec<Spare>> {
    static SPARES: OnceLock<Mutex<Vec<Spare>>> = OnceLock::new();
    SPARES.get_or_init(Default::default)
}

/// Makes the spare runs the last commands' kinds want, on the spawner thread once it is idle
/// (as `cgroup::make_spares`): no command waits for its `mkdir`s and limits.
pub(crate) fn make_spares() {
    let Some(Ok(subtree)) = SUBTREE.get() else {
        return;
    };
    let wanted: Vec<(Option<u64>, Option<u64>)> = match spares().lock() {
        Ok(spares) => spares
            .iter()
            .filter(|s| s.run.is_none())
            .map(|s| s.kind)
            .collect(),
        Err(_) => return,
    };
    for kind in wanted {
        let Ok(run) = make(subtree, kind) else {
            continue;
        };
        if let Ok(mut spares) = spares().lock() {
            if let Some(spare) = spares
                .iter_mut()
                .find(|s| s.kind == kind && s.run.is_none())
            {
                spare.run = Some(run);
            }
        }
    }
}

fn make(subtree: &Subtree, (pids, memory): (Option<u64>, Option<u64>)) -> std::io::Result<Run> {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let dir = subtree
        .dir
        .join(format!("run-{}", RUNS.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir(&dir)?;
    let made = (|| {
        if let Some(max) = pids {
            std::fs::write(dir.join("pids.max"), max.to_string())?;
        }
        if memory.is_some() {
            std::fs::write(dir.join("cgroup.subtree_control"), "+memory")?;
        }
        let (init, shell) = (dir.join("init"), dir.join("shell"));
        std::fs::create_dir(&init)?;
        std::fs::create_dir(&shell)?;
        if let Some(max) = memory {
            std::fs::write(shell.join("memory.max"), max.to_string())?;
            // Swap would let the tree grow past the limit (v1's memsw = limit).
            let swap = shell.join("memory.swap.max");
            if swap.exists() {
                std::fs::write(swap, "0")?;
            }
        }
        let folder = |path: &Path| -> std::io::Result<Option<OwnedFd>> {
            if !subtree.clone_into {
                return Ok(None);
            }
            Ok(Some(std::fs::File::open(path)?.into()))
        };
        let procs = |path: &Path| -> std::io::Result<OwnedFd> {
            Ok(std::fs::OpenOptions::new()
                .write(true)
                .open(path.join("cgroup.procs"))?
                .into())
        };
        Ok(Run {
            init_dir: folder(&init)?,
            shell_dir: folder(&shell)?,
            init_procs: procs(&init)?,
            shell_procs: procs(&shell)?,
            dir: dir.clone(),
            started: AtomicBool::new(false),
        })
    })();
    if made.is_err() {
        remove_run(&dir);
    }
    made
}

/// At the agent's end: kills what lingers in its runs (`cgroup.kill`, Linux 5.14; else SIGKILL
/// to each process listed), removes every folder it made, and moves itself back out of its
/// leaf. Idempotent; a no-op where the subtree was never set up.
pub fn release() {
    let Some(Ok(subtree)) = SUBTREE.get() else {
        return;
    };
    if let Ok(mut spares) = spares().lock() {
        spares.clear();
    }
    let mut dirs: Vec<PathBuf> = running()
        .lock()
        .map(|mut r| r.drain(..).map(|(_, dir)| dir).collect())
        .unwrap_or_default();
    if let Ok(mut lingering) = lingering().lock() {
        dirs.append(&mut lingering);
    }
    for dir in &dirs {
        if !remove_run(dir) {
            kill_all(dir);
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    for dir in dirs {
        while !remove_run(&dir) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    leave(&subtree.dir, &subtree.leaf);
}

/// Kills every process in `dir`'s tree.
fn kill_all(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    for leaf in ["init", "shell"] {
        let procs =
            std::fs::read_to_string(dir.join(leaf).join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|p| p.parse::<i32>().ok()) {
            // SAFETY: kill with a pid read from the run's own cgroup.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}
