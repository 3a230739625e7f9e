//! Kernel confinement for each command: what a command may write, whether it reaches the
//! network, and that nothing it starts outlives the run.
//!
//! Owns: the sandbox [`Mode`]s, turning a [`Launch`] into a confined one, and probing which
//! layers this machine enforces ([`Support`], [`doctor_report`], [`describe`]). Must not touch:
//! output handling, the environment scrub, ACP.
//!
//! Layers (Linux; see `notes/2026-11-29-sandbox-design.md` and `notes/2026-11-30-sandbox-v2.md`):
//! - **User namespace** for workspace and read-only commands, also when the agent is root (ids
//!   mapped to the agent's own, root keeping only file capabilities), with private UTS and IPC.
//! - **Read-only view** built in the mount namespace: `/` read-only and nosuid, the writable places
//!   bound back (nodev, nosuid), private `/dev/shm`, read-only mode's private temp dir.
//! - **Landlock** (second layer for writes; TCP when a network namespace is unavailable; signal
//!   scope), applied in the child right before exec.
//! - **PID + mount namespaces**: the command runs under a tiny init (PID 1) that exits with the
//!   shell, so the kernel kills everything the command left behind; a fresh `/proc` shows only
//!   the command's own processes, so no other process's environment is readable.
//! - **Network namespace** in `read-only` mode: only a private loopback.
//! - **Resource limits**: a pids cgroup per command where the agent may make one, else
//!   RLIMIT_NPROC inside the user namespace; a memory cgroup per command where the agent may make
//!   one, plus RLIMIT_DATA per process.
//! - **Subreaper** where namespaces don't work: kills what the command leaves running.
//!
//! Each layer degrades on its own: when the kernel or the host forbids it, commands still run and
//! [`describe`] / [`doctor_report`] say what is not enforced and why.
//!
//! Everything between fork and exec lives in `linux/child/` (async-signal-safe only), started by
//! [`spawn`], the one spawn path the engine and the tests use. For embedders: the pid [`spawn`]
//! returns is not bash itself but a small waiter that exits with bash's exit code or signal;
//! signal the process group (as the engine does), not that pid, and SIGKILL the group when the
//! run is over. Call [`protect_agent_process`] early in `main`.

#[cfg(target_os = "linux")]
mod linux;

#[cfg(target_os = "linux")]
pub use linux::step::{Step, StepError};

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::OnceLock;

/// How much a command may do. Offered to ACP clients as session modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Mode {
    /// Writes only under the session root, the temp dir and a few devices; network allowed.
    #[default]
    Workspace,
    /// No writes except the temp dir; no network.
    ReadOnly,
    /// No filesystem or network restriction (the environment scrub still applies); the PID
    /// namespace and the private /proc stay.
    Full,
    /// No kernel sandbox at all: no Landlock, no namespaces, no subreaper. Only the process
    /// group is killed when a run ends, and the environment scrub still applies. Chosen by
    /// whoever starts the agent (`--sandbox off`), never offered to a client that did not.
    Off,
}

impl Mode {
    /// The modes with a kernel sandbox: what a client may always choose between.
    pub const ALL: [Mode; 3] = [Mode::Workspace, Mode::ReadOnly, Mode::Full];

    /// The stable identifier used on the command line and as the ACP mode id.
    pub fn id(self) -> &'static str {
        match self {
            Mode::Workspace => "workspace",
            Mode::ReadOnly => "read-only",
            Mode::Full => "full",
            Mode::Off => "off",
        }
    }

    /// The modes a client may choose between: the sandboxed ones, and `off` when whoever started
    /// the agent chose it (`off_allowed`).
    pub fn offered(off_allowed: bool) -> Vec<Mode> {
        let off = off_allowed.then_some(Mode::Off);
        Mode::ALL.into_iter().chain(off).collect()
    }

    /// The mode with this [`Mode::id`], `off` included.
    pub fn from_id(id: &str) -> Option<Mode> {
        Mode::ALL
            .into_iter()
            .chain([Mode::Off])
            .find(|mode| mode.id() == id)
    }

    /// The human name shown in a mode picker.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Workspace => "Workspace",
            Mode::ReadOnly => "Read-only",
            Mode::Full => "Full access",
            Mode::Off => "Sandbox off",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// Per-command resource limits. `None`: no limit of that kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Processes (and threads) a command may have at once.
    pub max_processes: Option<u64>,
    /// Bytes of memory a command may use.
    pub max_memory: Option<u64>,
}

impl Limits {
    /// Room for real builds (a parallel `cargo build`, `make -j`, a test suite's threads).
    pub const DEFAULT_MAX_PROCESSES: u64 = 4096;
    /// No limit unless asked: a build's linker can take many GiB.
    pub const DEFAULT_MAX_MEMORY: Option<u64> = None;

    /// The same limits with at most `max` processes per command (`None`: no limit).
    pub fn max_processes(mut self, max: Option<u64>) -> Self {
        self.max_processes = max;
        self
    }

    /// The same limits with at most `bytes` of memory per command (`None`: no limit).
    pub fn max_memory(mut self, bytes: Option<u64>) -> Self {
        self.max_memory = bytes;
        self
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_processes: Some(Limits::DEFAULT_MAX_PROCESSES),
            max_memory: Limits::DEFAULT_MAX_MEMORY,
        }
    }
}

/// A program and its arguments, before the engine adds env, cwd and stdio.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Launch {
    /// The program to execute.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
}

impl Launch {
    /// `program` with `args`.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        Launch {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }
}

/// The directories a confined command is measured against.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Roots {
    /// The session's root directory (writable in `workspace` mode).
    pub workspace: PathBuf,
    /// The temp dir (writable in every mode).
    pub temp: PathBuf,
}

impl Roots {
    /// The session's root `workspace` and the temp dir `temp`.
    pub fn new(workspace: impl Into<PathBuf>, temp: impl Into<PathBuf>) -> Self {
        Roots {
            workspace: workspace.into(),
            temp: temp.into(),
        }
    }
}

/// A launch with its confinement applied: start it with [`spawn`]. Made by [`confine`]; callers
/// only read it.
#[non_exhaustive]
pub struct Confined {
    /// What to execute (possibly wrapped).
    pub launch: Launch,
    /// What the child does between fork and exec (`None`: nothing but exec).
    #[cfg(target_os = "linux")]
    plan: Option<linux::Prepared>,
    /// What this mode promises but this launch does not enforce, in words a person can act on.
    /// Empty when everything the mode promises is enforced.
    pub notices: Vec<String>,
}

/// Which sandbox layers work on this machine: each `Ok`, or `Err(why not, with what to do)`.
///
/// Made by [`Support::probe`] (or [`Support::current`]); [`Support::none`] and [`Support::all`]
/// are starting points for tests of the degraded paths (set a field to change one layer).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Support {
    /// Landlock, with the kernel's ABI version.
    pub landlock: Result<u32, String>,
    /// PID + mount namespaces: nothing a command starts outlives it.
    pub namespaces: Result<(), String>,
    /// A fresh /proc in the PID namespace: other processes' environments are out of sight.
    pub private_proc: Result<(), String>,
    /// A network namespace (read-only mode's "no network").
    pub network_namespace: Result<(), String>,
    /// A user namespace for every workspace and read-only command (also for a root agent): the
    /// command holds no capability over the host (no device nodes, host name, host network or
    /// host IPC objects).
    pub user_namespace: Result<(), String>,
    /// The read-only view of the filesystem built in the mount namespace (writable binds for
    /// the writable places, private /dev/shm and read-only mode's private temp dir).
    pub filesystem_view: Result<(), String>,
}

impl Support {
    /// Probes every layer for real (forks children that try each one). Takes a few
    /// milliseconds; [`Support::current`] caches it.
    pub fn probe() -> Support {
        #[cfg(target_os = "linux")]
        {
            linux::probe_support()
        }
        #[cfg(not(target_os = "linux"))]
        {
            Support::none(&format!(
                "the kernel sandbox is Linux-only and this is {}",
                std::env::consts::OS
            ))
        }
    }

    /// This machine's support, probed once per process.
    pub fn current() -> &'static Support {
        static SUPPORT: OnceLock<Support> = OnceLock::new();
        SUPPORT.get_or_init(Support::probe)
    }

    /// No layer works, for `reason` (non-Linux hosts; tests of the degraded paths).
    pub fn none(reason: &str) -> Support {
        Support {
            landlock: Err(reason.to_string()),
            namespaces: Err(reason.to_string()),
            private_proc: Err(reason.to_string()),
            network_namespace: Err(reason.to_string()),
            user_namespace: Err(reason.to_string()),
            filesystem_view: Err(reason.to_string()),
        }
    }

    /// Every layer works, with Landlock at ABI `landlock_abi`.
    pub fn all(landlock_abi: u32) -> Support {
        Support {
            landlock: Ok(landlock_abi),
            namespaces: Ok(()),
            private_proc: Ok(()),
            network_namespace: Ok(()),
            user_namespace: Ok(()),
            filesystem_view: Ok(()),
        }
    }

    fn landlock_abi(&self) -> u32 {
        *self.landlock.as_ref().unwrap_or(&0)
    }
}

/// Applies `mode` to `launch` with what this machine supports ([`Support::current`]).
pub fn confine(launch: Launch, mode: Mode, roots: &Roots, limits: Limits) -> Confined {
    confine_with(launch, mode, roots, limits, Support::current())
}

/// Applies `mode` to `launch`, using only the layers `support` says work.
pub fn confine_with(
    launch: Launch,
    mode: Mode,
    roots: &Roots,
    limits: Limits,
    support: &Support,
) -> Confined {
    if mode == Mode::Off {
        return Confined {
            launch,
            #[cfg(target_os = "linux")]
            plan: None,
            notices: Vec::new(),
        };
    }
    let notices = headline_gaps(mode, support);
    #[cfg(target_os = "linux")]
    {
        let mut notices = notices;
        let namespaces = support.namespaces.is_ok();
        let confined_fs = mode != Mode::Full;
        // SAFETY: plain getter.
        let root = unsafe { libc::geteuid() } == 0;
        let user_namespace = support.user_namespace.is_ok() && (confined_fs || !root);
        let net_ns = mode == Mode::ReadOnly && support.network_namespace.is_ok();
        let tcp_rules = mode == Mode::ReadOnly && !net_ns;
        let ruleset = match (mode, &support.landlock) {
            (Mode::Full, _) | (_, Err(_)) => None,
            (_, Ok(_)) => match linux::ruleset(mode, roots, tcp_rules) {
                Ok(fd) => fd,
                Err(why) => {
                    notices.push(format!(
                        "{} mode: writes are not restricted for this command ({why})",
                        mode.name()
                    ));
                    None
                }
            },
        };
        let layers = linux::Layers {
            namespaces,
            user_namespace,
            private_ipc_uts: user_namespace && confined_fs,
            private_proc: support.private_proc.is_ok(),
            network_namespace: net_ns,
            view: confined_fs && user_namespace && support.filesystem_view.is_ok(),
        };
        let prepared = linux::Prepared::new(mode, roots, layers, ruleset, limits);
        Confined {
            launch,
            plan: Some(prepared),
            notices,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (roots, limits);
        Confined { launch, notices }
    }
}

/// What [`spawn`] starts besides the program: the exact environment, the directory, where
/// stdout and stderr go, and fds the shell gets as other numbers.
#[cfg(target_os = "linux")]
#[non_exhaustive]
pub struct SpawnRequest<'a> {
    /// The whole environment of the command (nothing else is inherited).
    pub env: &'a [(OsString, OsString)],
    /// The directory the command starts in.
    pub cwd: &'a std::path::Path,
    /// stdout and stderr of the command.
    pub output: std::os::fd::BorrowedFd<'a>,
    /// `(source, number)`: `source` appears as fd `number` in the shell (at most 8). Nothing
    /// else but 0–2 reaches the shell.
    pub pass: &'a [(std::os::fd::BorrowedFd<'a>, i32)],
}

#[cfg(target_os = "linux")]
impl<'a> SpawnRequest<'a> {
    /// A command with exactly `env`, started in `cwd`, its stdout and stderr to `output`, and no
    /// other fd passed.
    pub fn new(
        env: &'a [(OsString, OsString)],
        cwd: &'a std::path::Path,
        output: std::os::fd::BorrowedFd<'a>,
    ) -> Self {
        SpawnRequest {
            env,
            cwd,
            output,
            pass: &[],
        }
    }

    /// Sets [`SpawnRequest::pass`].
    pub fn pass(mut self, pass: &'a [(std::os::fd::BorrowedFd<'a>, i32)]) -> Self {
        self.pass = pass;
        self
    }
}

/// Starts `confined` in a new process group, stdin from /dev/null, with the parent-death
/// signal armed, and returns the pid to wait for (and whose group to signal) once the shell has
/// exec'd. A sandbox step that fails comes back as an error wrapping a [`StepError`] (which
/// step, which errno); the command did not run. Blocks until the shell has exec'd: the engine
/// calls it on a thread of its own, which must outlive the command (the parent-death signal
/// is tied to the thread that forks).
#[cfg(target_os = "linux")]
pub fn spawn(confined: &Confined, request: &SpawnRequest) -> std::io::Result<i32> {
    use std::os::fd::AsRawFd;
    let pass: Vec<(i32, i32)> = request
        .pass
        .iter()
        .map(|(fd, number)| (fd.as_raw_fd(), *number))
        .collect();
    let raw = linux::spawn::Request {
        launch: &confined.launch,
        env: request.env,
        cwd: request.cwd,
        output: request.output.as_raw_fd(),
        pass: &pass,
    };
    linux::spawn::spawn(&raw, confined.plan.as_ref().map(|p| &p.plan), false)
}

/// Makes this process non-dumpable (`PR_SET_DUMPABLE 0`): a command running as the same user
/// can then not open `/proc/<agent>/fd` (the protocol stream), `environ` or `mem`. `serve` does
/// this at start; an embedder should too, early in `main`. It also turns off core dumps of the
/// agent and lets only root attach a debugger. Root commands (holding CAP_SYS_PTRACE) are not
/// stopped by it: that is what the user namespace of the confined modes is for.
pub fn protect_agent_process() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl on this process.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/// Runs `job` on the thread that starts commands (see [`spawn`]).
#[cfg(target_os = "linux")]
pub fn on_spawner_thread(job: Box<dyn FnOnce() + Send>) {
    linux::spawn::on_spawner_thread(job)
}

/// What `mode` promises first (writes; read-only's network) and `support` can't enforce.
fn headline_gaps(mode: Mode, support: &Support) -> Vec<String> {
    let mut gaps = Vec::new();
    if matches!(mode, Mode::Full | Mode::Off) {
        return gaps;
    }
    if let Err(why) = &support.landlock {
        gaps.push(format!(
            "{} mode: writes are NOT restricted here ({why})",
            mode.name()
        ));
    }
    if mode == Mode::ReadOnly && !network_blocked(support) {
        gaps.push(format!(
            "Read-only mode: the network is NOT blocked here ({})",
            support
                .network_namespace
                .as_ref()
                .err()
                .map_or("", |s| s.as_str())
        ));
    }
    gaps
}

fn network_blocked(support: &Support) -> bool {
    support.network_namespace.is_ok() || support.landlock_abi() >= 4
}

/// What `mode` lets commands do, then what this machine does not enforce of it (if anything):
/// a short text for a mode picker, which already shows the mode's name.
pub fn describe(mode: Mode) -> String {
    describe_with(mode, Support::current())
}

fn agent_is_root() -> bool {
    // SAFETY (Unix): plain getter.
    #[cfg(unix)]
    return unsafe { libc::geteuid() } == 0;
    #[cfg(not(unix))]
    false
}

/// How `--max-processes` is enforced here, or why not.
fn process_limit_support(support: &Support) -> Result<String, String> {
    #[cfg(target_os = "linux")]
    return linux::process_limit_support(support.user_namespace.is_ok());
    #[cfg(not(target_os = "linux"))]
    Err(format!("not on {}", std::env::consts::OS))
}

/// Whether `--max-memory` binds a command's whole tree here (a memory cgroup), or why not.
fn memory_cgroup_support() -> Result<String, String> {
    #[cfg(target_os = "linux")]
    return linux::memory_limit_support();
    #[cfg(not(target_os = "linux"))]
    Err(format!("not on {}", std::env::consts::OS))
}

/// How `--max-memory` is enforced here.
fn memory_limit_support() -> String {
    match memory_cgroup_support() {
        Ok(_) => "a memory cgroup for the whole tree, and RLIMIT_DATA per process".to_string(),
        Err(_) => "RLIMIT_DATA per process only (see the memory cgroup)".to_string(),
    }
}

/// [`describe`] for a given [`Support`].
pub fn describe_with(mode: Mode, support: &Support) -> String {
    let root = agent_is_root();
    let abi = support.landlock_abi();
    let temp = std::env::temp_dir();
    let allows = match mode {
        Mode::Workspace => format!(
            "Commands change files only in the session folder and {}, and may use the network.",
            temp.display()
        ),
        Mode::ReadOnly => "Commands read everything but change nothing outside a private temp \
                           dir, with no network."
            .to_string(),
        Mode::Full => "Commands change any file the agent may and use the network; what they \
                       start still ends with them."
            .to_string(),
        Mode::Off => "Commands run with no kernel sandbox, chosen by whoever started the \
                      agent (`--sandbox off`)."
            .to_string(),
    };
    let mut gaps: Vec<String> = Vec::new();
    let confined = matches!(mode, Mode::Workspace | Mode::ReadOnly);
    if confined {
        let view = support.filesystem_view.is_ok();
        match (view, support.landlock.is_ok()) {
            (false, false) => gaps.push("any write restriction".to_string()),
            (false, true) => {
                gaps.push("protecting metadata (chmod, chown, timestamps) outside".to_string());
                if abi < 3 {
                    gaps.push("blocking truncation outside".to_string());
                }
            }
            _ => {}
        }
        if support.user_namespace.is_err() && root {
            gaps.push(
                "dropping root's capabilities (device nodes, host name, host network, IPC)"
                    .to_string(),
            );
        }
        if mode == Mode::ReadOnly {
            if support.network_namespace.is_err() {
                if abi >= 4 {
                    gaps.push("blocking UDP and other non-TCP traffic".to_string());
                } else {
                    gaps.push("blocking the network".to_string());
                }
            }
            if abi < 9 && !view {
                gaps.push("blocking Unix sockets on disk (Docker's, D-Bus's)".to_string());
            }
        }
    }
    if mode != Mode::Off {
        if support.namespaces.is_err() {
            gaps.push(if cfg!(target_os = "linux") {
                "containing daemons started through systemd or D-Bus (no PID namespace)".to_string()
            } else {
                "ending background processes a command leaves".to_string()
            });
        }
        if support.private_proc.is_err() {
            gaps.push("hiding other processes' environments (no private /proc)".to_string());
        }
        if let Err(why) = process_limit_support(support) {
            gaps.push(format!("--max-processes ({why})"));
        }
    }
    let gives_up = match (mode, root) {
        (Mode::Full, true) => Some(
            "As root, commands keep every capability: they can make device nodes, change the \
             host's name and network, and unmount the private /proc to read other processes' \
             memory and environments (the agent's too).",
        ),
        (Mode::Full, false) => {
            Some("Commands can change everything this user owns, the agent's own files included.")
        }
        (Mode::Off, true) => Some(
            "As root, commands can do anything root can: read and write any process's memory, \
             fds and environment (the agent's stdout too), make devices, change the host; what \
             they start in a new session can outlive them.",
        ),
        (Mode::Off, false) => Some(
            "Commands can change everything this user owns and read this user's other \
             processes' environments (not the agent's: it is non-dumpable); what they start in \
             a new session can outlive them.",
        ),
        _ => None,
    };
    let mut line = allows;
    if let Some(text) = gives_up {
        line.push(' ');
        line.push_str(text);
    }
    if !gaps.is_empty() {
        let _ = write!(
            line,
            " Not enforced on this machine: {} — run `acp-bash doctor`.",
            gaps.join("; ")
        );
    }
    line
}

/// One layer of the sandbox and whether it works here (a line of [`DoctorReport`]; callers only
/// read it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LayerReport {
    /// The layer's name.
    pub name: &'static str,
    /// What it gives when it works.
    pub purpose: &'static str,
    /// `Ok(details)` or `Err(why not and what to do)`.
    pub status: Result<String, String>,
}

/// Every layer, probed for real, plus each mode's description on this machine. Made by
/// [`DoctorReport::probe`] or [`DoctorReport::from_support`]; callers only read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DoctorReport {
    /// Each kernel layer and whether it works here.
    pub layers: Vec<LayerReport>,
    /// Each mode and what it enforces here.
    pub modes: Vec<(Mode, String)>,
}

impl DoctorReport {
    /// Probes now (not the cached [`Support::current`]).
    pub fn probe() -> DoctorReport {
        DoctorReport::from_support(&Support::probe())
    }

    /// The report for `support`.
    pub fn from_support(support: &Support) -> DoctorReport {
        let abi = support.landlock_abi();
        let landlock = |min: u32, what: &str| {
            match &support.landlock {
            Ok(v) if *v >= min => Ok(format!("Landlock ABI {v}")),
            Ok(v) => Err(format!("this kernel has Landlock ABI {v}; {what} needs ABI {min} or newer (a newer kernel)")),
            Err(why) => Err(why.clone()),
        }
        };
        let mut fs = landlock(1, "");
        if let Ok(details) = &mut fs {
            if abi < 3 {
                details.push_str(
                    "; truncating files outside the allowed folders is not blocked (ABI < 3)",
                );
            }
            if abi < 5 {
                details.push_str("; device ioctls are not blocked (ABI < 5)");
            }
        }
        let ok = |r: &Result<(), String>, details: &str| r.clone().map(|()| details.to_string());
        let root = agent_is_root();
        let how = match (&support.user_namespace, root) {
            (Ok(()), true) => "in a user namespace (root's ids mapped to themselves)",
            (Ok(()), false) => "in a user namespace (this user's id mapped to itself)",
            (Err(_), _) => "without a user namespace",
        };
        let layers = vec![
            LayerReport {
                name: "Landlock filesystem rules",
                purpose: "workspace / read-only: writes outside the allowed folders fail with EACCES",
                status: fs,
            },
            LayerReport {
                name: "Landlock TCP rules",
                purpose: "read-only: blocks TCP when there is no network namespace",
                status: landlock(4, "blocking TCP"),
            },
            LayerReport {
                name: "Landlock Unix-socket rules",
                purpose: "read-only: blocks connecting to Unix sockets on disk (Docker, D-Bus)",
                status: landlock(9, "blocking Unix sockets"),
            },
            LayerReport {
                name: "Landlock signal scope",
                purpose: "workspace / read-only: commands can't signal processes outside their sandbox",
                status: landlock(6, "the signal scope"),
            },
            LayerReport {
                name: "PID + mount namespaces",
                purpose: "every mode: nothing a command starts (setsid, double fork, nohup) outlives it",
                status: ok(&support.namespaces, how),
            },
            LayerReport {
                name: "user namespace",
                purpose: "workspace / read-only (and every mode when not root): commands hold no capability over the host: no device nodes, host name, host network or host IPC changes",
                status: ok(&support.user_namespace, how),
            },
            LayerReport {
                name: "read-only filesystem view",
                purpose: "workspace / read-only: everything read-only and nosuid except the writable places (nodev, nosuid), private /dev/shm and IPC; metadata outside can't change",
                status: ok(&support.filesystem_view, "mount namespace: read-only bind of /, writable binds"),
            },
            LayerReport {
                name: "resource limits",
                purpose: "--max-processes / --max-memory for each command",
                status: process_limit_support(support)
                    .map(|how| format!("--max-processes: {how}; --max-memory: {}", memory_limit_support())),
            },
            LayerReport {
                name: "memory cgroup",
                purpose: "--max-memory for a command's whole tree (tmpfs files count; over it the kernel kills one of its processes); without it, RLIMIT_DATA per process only",
                status: memory_cgroup_support(),
            },
            LayerReport {
                name: "subreaper fallback",
                purpose: "every mode, when the namespaces don't work: kills what a command leaves running",
                status: if cfg!(target_os = "linux") {
                    Ok(if support.namespaces.is_ok() {
                        "available; not needed here".to_string()
                    } else {
                        "in use instead of the PID namespace".to_string()
                    })
                } else {
                    Err("Linux only".to_string())
                },
            },
            LayerReport {
                name: "private /proc",
                purpose: "every mode: other processes' environments (/proc/<pid>/environ) are out of sight",
                status: ok(&support.private_proc, "fresh /proc for the command's PID namespace"),
            },
            LayerReport {
                name: "network namespace",
                purpose: "read-only: no network at all, only a private loopback",
                status: ok(&support.network_namespace, how),
            },
        ];
        let modes = Mode::ALL
            .into_iter()
            .chain([Mode::Off])
            .map(|m| (m, describe_with(m, support)))
            .collect();
        DoctorReport { layers, modes }
    }
}

impl std::fmt::Display for DoctorReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "acp-bash sandbox layers on this machine:")?;
        for layer in &self.layers {
            match &layer.status {
                Ok(details) => writeln!(f, "  [works]   {} ({details})", layer.name)?,
                Err(why) => writeln!(f, "  [missing] {}: {why}", layer.name)?,
            }
            writeln!(f, "            {}", layer.purpose)?;
        }
        writeln!(f, "\nModes:")?;
        for (mode, line) in &self.modes {
            writeln!(f, "  {:<10} {line}", mode.id())?;
        }
        Ok(())
    }
}

/// What `acp-bash doctor` prints: each layer, whether it works here, and why not.
pub fn doctor_report() -> String {
    DoctorReport::probe().to_string()
}
