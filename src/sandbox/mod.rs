//! Kernel confinement for each command: what a command may write, whether it reaches the
//! network, and that nothing it starts outlives the run.
//!
//! Owns: the sandbox [`Mode`]s, turning a [`Launch`] into a confined one, and probing which
//! layers this machine enforces ([`Support`], [`doctor_report`], [`describe`]). Must not touch:
//! output handling, the environment scrub, ACP.
//!
//! This module is platform-neutral: the modes, the limits, [`confine`] / [`spawn`] and the
//! report types. What a platform enforces lives in its backend (`linux/`: support probe,
//! confinement, the spawn path, the mode descriptions and doctor's layer table; elsewhere
//! `unsupported.rs`, which enforces nothing and says so).
//!
//! Layers (Linux; see `notes/2026-11-29-sandbox-design.md` and `notes/2026-11-30-sandbox-v2.md`):
//! - **User namespace** for workspace and read-only commands, also when the agent is root (ids
//!   mapped to the agent's own, root keeping only file capabilities), with private UTS and IPC.
//! - **Read-only view** built in the mount namespace: `/` read-only and nosuid, the writable places
//!   bound back (nodev, nosuid), the temp dir replaced (workspace mode: the session's own folder,
//!   [`Roots::session_temp`]; read-only mode: a fresh tmpfs), a minimal `/dev` of the command's
//!   own (host nodes bound, a fresh devpts, private shm), empty mounts over host daemons' socket
//!   folders and over credential files ([`Protection`], [`masked_paths`]), and in workspace mode
//!   Git hooks and config read-only (`notes/2026-12-01-sandbox-view-v3.md`); in workspace mode
//!   a copy-on-write layer of the session's own over the home's package caches
//!   ([`Roots::cache_layer`], `notes/2026-12-01-package-caches.md`).
//! - **Landlock** (second layer for writes; TCP when a network namespace is unavailable; signal
//!   and abstract-socket scopes; Unix sockets on disk beneath the writable places at ABI 9),
//!   applied in the child right before exec.
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

// The platform's backend: everything that knows a kernel, reached only through the `Backend`
// trait (`backend.rs`), implemented by one unit struct per platform and chosen here by `cfg`.
mod backend;
#[cfg(target_os = "linux")]
mod linux;
// macOS's backend; its pure parts (the Seatbelt profile, the sweep's parsing, the reports) are
// unit-tested on every platform.
#[cfg(any(target_os = "macos", test))]
mod macos;
// The portable spawn path (posix_spawn) macOS uses, unit-tested on every platform.
#[cfg(any(target_os = "macos", test))]
mod portable;
// Temp files for Linux's memfds where there are none (macOS, unsupported), tested everywhere.
#[cfg(any(not(target_os = "linux"), test))]
mod temp_files;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod unsupported;

use backend::Backend;
/// This build's backend.
#[cfg(target_os = "linux")]
type Platform = linux::Linux;
/// This build's backend.
#[cfg(target_os = "macos")]
type Platform = macos::MacOs;
/// This build's backend.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
type Platform = unsupported::Unsupported;

mod caches;
mod masks;
pub(crate) mod warm;
#[cfg_attr(not(target_os = "linux"), allow(unused_imports))]
pub(crate) use masks::canonical_under;

pub use caches::{package_caches, remove_session_folder, PACKAGE_CACHES};
#[cfg(target_os = "linux")]
pub use linux::step::{Step, StepError};
pub use masks::{
    find_git_repos, is_ssh_private_key, masked_paths, Protection, GIT_SCAN_DEPTH, GIT_SCAN_ENTRIES,
    GIT_SCAN_REPOS, HOME_CREDENTIALS, WINDOWS_HOME_CREDENTIALS,
};
// The one nominal path into the backend: a public type needs one (and an inherent impl).
// `Support::probe` returns `Platform::probe_support()`, so it must be `Backend::Support`.
#[cfg(target_os = "linux")]
pub use linux::support::Support;
#[cfg(target_os = "macos")]
pub use macos::support::Support;
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub use unsupported::Support;

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

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
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Roots {
    /// The session's root directory (writable in `workspace` mode).
    pub workspace: PathBuf,
    /// The temp dir (writable in every mode).
    pub temp: PathBuf,
    /// Workspace mode: a host folder of the session's own that commands see as the temp dir
    /// (and `/tmp`) instead of the host's, where the view works (`None`: the host's temp dir).
    pub session_temp: Option<PathBuf>,
    /// Workspace mode: a host folder of the session's own that holds a copy-on-write layer
    /// over each of the home's package caches ([`PACKAGE_CACHES`]): writes land there, the
    /// host's caches never change (`None`: the caches stay read-only).
    pub cache_layer: Option<PathBuf>,
    /// What the view hides (credential files, the agent's own files) and whether Git
    /// metadata stays read-only.
    pub protection: Protection,
    /// Tests only: build the view the way kernels without `mount_setattr` (Linux 5.10, 5.11)
    /// need, on this one too, so that both ways are tested here
    /// ([`EngineConfig::view_without_mount_setattr`](crate::exec::EngineConfig)).
    #[doc(hidden)]
    pub view_without_mount_setattr: bool,
    /// Workspace mode: the network only through the agent's proxy (a network namespace with
    /// only a loopback, bridged to the proxy: [`crate::netproxy`]) where [`network_proxied_here`]
    /// holds; `false`: the whole network.
    pub proxied_network: bool,
    /// Host folders this one command may write too, in workspace and read-only mode (an
    /// "allow once" answer to a refused write: [`crate::permit`]): bound writable in the view
    /// and granted by Landlock, masks still over them. Such a command never runs in the
    /// session's zygote (its view is its own).
    pub also_writable: Vec<PathBuf>,
    /// Hosts this one command may also reach through the allowlist's proxy, in workspace mode
    /// (an "allow once" answer to a refused host: [`crate::permit`]): the command never runs
    /// in the session's zygote, so it has a network namespace of its own, bridged to a proxy
    /// listener of its own that also allows them. The session's other commands (its background
    /// jobs too) keep the session's listener, which does not.
    pub also_hosts: Vec<crate::netproxy::HostPattern>,
}

impl Roots {
    /// The session's root `workspace` and the temp dir `temp`, with the host's temp dir and
    /// nothing masked.
    pub fn new(workspace: impl Into<PathBuf>, temp: impl Into<PathBuf>) -> Self {
        Roots {
            workspace: workspace.into(),
            temp: temp.into(),
            session_temp: None,
            cache_layer: None,
            protection: Protection::default(),
            view_without_mount_setattr: false,
            proxied_network: false,
            also_writable: Vec::new(),
            also_hosts: Vec::new(),
        }
    }

    /// Sets [`Roots::proxied_network`].
    pub fn proxied_network(mut self, proxied: bool) -> Self {
        self.proxied_network = proxied;
        self
    }

    /// Sets [`Roots::session_temp`].
    pub fn session_temp(mut self, dir: impl Into<PathBuf>) -> Self {
        self.session_temp = Some(dir.into());
        self
    }

    /// Sets [`Roots::cache_layer`].
    pub fn cache_layer(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_layer = Some(dir.into());
        self
    }

    /// Sets [`Roots::protection`].
    pub fn protection(mut self, protection: Protection) -> Self {
        self.protection = protection;
        self
    }
}

/// A launch with its confinement applied: start it with [`spawn`]. Made by [`confine`]; callers
/// only read it.
#[non_exhaustive]
pub struct Confined {
    /// What to execute (possibly wrapped).
    pub launch: Launch,
    /// What the platform does for this command between fork and exec (`None`: nothing but exec).
    // Read by a backend that starts commands (not the unsupported one, which refuses).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    plan: Option<<Platform as Backend>::Prepared>,
    /// What this mode promises but this launch does not enforce, in words a person can act on.
    /// Empty when everything the mode promises is enforced.
    pub notices: Vec<String>,
}

impl Confined {
    /// Whether nothing happens between this command's fork and its exec but the exec's own
    /// preparation (`--sandbox off`, or a machine without any layer): no namespace, view or
    /// zygote, so it may be forked on any thread that outlives it.
    pub fn is_bare(&self) -> bool {
        self.plan.is_none()
    }
}

impl Support {
    /// Probes every layer for real (on Linux it forks children that try each one, a few
    /// milliseconds); [`Support::current`] caches it.
    pub fn probe() -> Support {
        Platform::probe_support()
    }

    /// This machine's support, probed once per process.
    pub fn current() -> &'static Support {
        CURRENT_SUPPORT.get_or_init(Support::probe)
    }
}

static CURRENT_SUPPORT: std::sync::OnceLock<Support> = std::sync::OnceLock::new();

/// Whether [`confine`] of a `mode` command under `roots` would still probe the kernel (fork
/// children and wait for them): the first command of a process (before [`Support::current`]
/// is known), or the first workspace command for a home whose package caches' layers were not
/// probed yet. An async caller then confines on a blocking thread: a probe's child can take
/// seconds to end under a busy disk, and waiting for it on a runtime worker stalls every
/// session of the agent (issue 20 point 9, `notes/reliability.md`). Cheap otherwise (a lock).
pub fn confine_would_probe(mode: Mode, roots: &Roots) -> bool {
    if CURRENT_SUPPORT.get().is_none() {
        return true;
    }
    match (mode, &roots.cache_layer, &roots.protection.home) {
        (Mode::Workspace, Some(_), Some(home)) => Platform::cache_layers_unprobed(home),
        _ => false,
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
    Platform::confine_with(launch, mode, roots, limits, support)
}

/// What [`spawn`] starts besides the program: the exact environment, the directory, where
/// stdout and stderr go, and fds the shell gets as other numbers.
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
    /// The session whose zygote starts the command (the engine's path, [`spawn_watched`]).
    #[cfg_attr(not(any(target_os = "linux", target_os = "macos")), allow(dead_code))]
    pub(crate) session: Option<&'a SessionSandbox>,
}

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
            session: None,
        }
    }

    /// Sets [`SpawnRequest::pass`].
    pub fn pass(mut self, pass: &'a [(std::os::fd::BorrowedFd<'a>, i32)]) -> Self {
        self.pass = pass;
        self
    }
}

/// Starts `confined` in a new session and process group (no controlling terminal), stdin from
/// /dev/null, with the parent-death
/// signal armed, and returns the pid to wait for (and whose group to signal) once the shell has
/// exec'd. A sandbox step that fails comes back as an error for which [`is_setup_failure`] is
/// true (on Linux it wraps a `StepError`: which step, which errno); the command did not run. Blocks until the shell has exec'd: the engine
/// calls it on a thread of its own, which must outlive the command (the parent-death signal
/// is tied to the thread that forks).
pub fn spawn(confined: &Confined, request: &SpawnRequest) -> std::io::Result<i32> {
    let request = SpawnRequest {
        session: None,
        ..*request
    };
    Platform::spawn_confined(confined, &request).map(|(pid, _)| pid)
}

/// [`spawn`], through `request.session`'s zygote where it serves the command, returning what
/// to wait on ([`SpawnedChild::new`]).
pub(crate) fn spawn_watched(
    confined: &Confined,
    request: &SpawnRequest,
) -> std::io::Result<Spawned> {
    Platform::spawn_confined(confined, request).map(|(pid, status)| Spawned { pid, status })
}

/// Starts `session`'s zygote for `confined`'s mode and view in the background, on the
/// spawner thread (where every zygote is forked: its parent-death signal is tied to that
/// thread), unless one that fits runs already or the session is gone by then. The session's
/// first command in that mode then finds its namespaces and view built
/// (`notes/2026-12-02-zygote-first-command.md`).
pub(crate) fn start_zygote_early(confined: Confined, session: &std::sync::Arc<SessionSandbox>) {
    let session = std::sync::Arc::downgrade(session);
    on_spawner_thread(Box::new(move || {
        if let Some(session) = session.upgrade() {
            Platform::start_zygote_early(&confined, &session);
            session.used();
        }
    }));
}

/// Drops what the sandbox keeps for the session whose own folder is `dir` (its kept plans,
/// each holding a Landlock ruleset's fd): called when the session ends.
pub(crate) fn forget_session(dir: &std::path::Path) {
    Platform::forget_session(dir)
}

/// What [`spawn_watched`] started: the pid (and process group) and, for a command a zygote
/// started, the pipe its wait status comes on.
pub(crate) struct Spawned {
    pub(crate) pid: i32,
    status: Option<OwnedFd>,
}

/// A session's own part of the sandbox: on Linux its zygotes (one per mode, each holding the
/// session's namespaces and view; `notes/2026-12-01-session-zygote.md`). Dropped with the
/// session, which ends them; they also end while the session is idle or others were used
/// since ([`warm`]), and its next command starts them again.
pub(crate) struct SessionSandbox {
    zygotes: std::sync::Mutex<<Platform as Backend>::Zygotes>,
    /// The zygote's program (`None`: this program, if it serves as one).
    program: Option<PathBuf>,
    /// This session's number in the engine's list of sessions with helpers.
    id: u64,
    /// That list (`None`: the helpers live as long as the session).
    warm: Option<warm::WarmHandle>,
    /// The session's commands being started or running ([`InUse`]): while there is one, its
    /// helpers do not end (a command's PID 1 dies with its zygote).
    running: std::sync::atomic::AtomicUsize,
    /// Workspace mode's network allowlist: the proxy its namespaces are bridged to (`None`:
    /// workspace commands reach the whole network).
    pub(crate) network: Option<crate::netproxy::SessionNetwork>,
}

/// A command of a session, from before its start to its end: its session's helpers stay
/// while it lives, and count as used when it ends.
pub(crate) struct InUse(std::sync::Arc<SessionSandbox>);

impl Drop for InUse {
    fn drop(&mut self) {
        self.0
            .running
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        self.0.used();
    }
}

impl SessionSandbox {
    /// A session's sandbox whose zygotes start from `program` (`None`: this program, when its
    /// `main` calls [`zygote_main_if_asked`]), kept in `warm`'s bound when there is one.
    pub(crate) fn new(program: Option<PathBuf>, warm: Option<warm::WarmHandle>) -> SessionSandbox {
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        SessionSandbox {
            zygotes: Default::default(),
            program,
            id: IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            warm,
            running: std::sync::atomic::AtomicUsize::new(0),
            network: None,
        }
    }

    /// The same, with workspace commands' network through `network`.
    pub(crate) fn with_network(mut self, network: Option<crate::netproxy::SessionNetwork>) -> Self {
        self.network = network;
        self
    }

    /// The backend's zygotes and the program they start from.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn parts(
        &self,
    ) -> (
        &std::sync::Mutex<<Platform as Backend>::Zygotes>,
        Option<&std::path::Path>,
    ) {
        (&self.zygotes, self.program.as_deref())
    }

    /// The pids of this session's running zygotes.
    pub(crate) fn zygote_pids(&self) -> Vec<i32> {
        Platform::zygote_pids(&self.zygotes.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether helpers of this session run now.
    fn has_helpers(&self) -> bool {
        !self.zygote_pids().is_empty()
    }

    /// Ends this session's helpers, unless a command of it is being started or runs (it then
    /// puts itself back in the list when it ends: [`InUse`]).
    fn end_helpers(&self) {
        if let Ok(mut zygotes) = self.zygotes.try_lock() {
            // Read under the lock: a command counts itself before it takes the lock.
            if self.running.load(std::sync::atomic::Ordering::Acquire) == 0 {
                Platform::end_helpers(&mut zygotes);
            }
        }
    }

    /// Lets this session's spares go (its zygotes stay), unless a command of it is being
    /// started (it then puts itself back at the head of the list). A running command does not
    /// need its zygote's spare: that one is for the next command.
    fn let_spares_go(&self) {
        if let Ok(mut zygotes) = self.zygotes.try_lock() {
            Platform::let_spares_go(&mut zygotes);
        }
    }

    /// A command of this session is about to start: its helpers stay until the returned
    /// guard drops (when the command has ended, or did not start).
    pub(crate) fn in_use(self: &std::sync::Arc<Self>) -> InUse {
        self.running
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        InUse(self.clone())
    }

    /// This session started a command or its helpers: it keeps them, and the sessions used
    /// least recently beyond the bound let theirs go.
    pub(crate) fn used(self: &std::sync::Arc<Self>) {
        if let Some(warm) = &self.warm {
            warm.used(self);
        }
    }
}

impl Drop for SessionSandbox {
    fn drop(&mut self) {
        if let Some(warm) = &self.warm {
            warm.forget(self.id);
        }
    }
}

/// When this process was started as a session's zygote (under its hidden `argv[0]`), runs it
/// and exits; otherwise returns at once and lets this program serve as its own sessions'
/// zygote. Call it first thing in `main` (the `acp-bash` binary does): without it (and
/// without `EngineConfig::zygote_program`), each sandboxed command builds its own namespaces.
pub fn zygote_main_if_asked() {
    Platform::zygote_main_if_asked()
}

/// A command ended (its status is in): what was made for it alone goes once its processes are.
pub(crate) fn command_ended() {
    Platform::command_ended()
}

/// The program ends: the folders made for its commands (Linux: cgroups) go, waiting briefly
/// for processes the kernel still counts in them.
pub(crate) fn leave() {
    Platform::leave()
}

/// At start: the empty folders that programs which are gone left (Linux: cgroups) go.
pub(crate) fn remove_abandoned() {
    Platform::remove_abandoned()
}

/// What to say when the kernel refused a command a process (EAGAIN from a fork or clone): the
/// limit that was reached, in words.
pub(crate) fn no_process_could_be_started() -> String {
    #[cfg(target_os = "linux")]
    let limit = linux::process_limit();
    #[cfg(not(target_os = "linux"))]
    let limit: Option<String> = None;
    let limit = limit.unwrap_or_else(|| {
        "the system has no room for another process (the kernel refused one: EAGAIN)".to_string()
    });
    format!(
        "no process could be started: {limit}. Ending running commands or jobs (`/jobs`, \
         `/kill`) frees some; so does a lower `--max-warm-sessions`"
    )
}

/// Whether `error`, from [`spawn`], says that the sandbox could not be set up (a step between
/// fork and exec failed; its text says which and what to do) rather than that the program
/// could not be started. Either way the command did not run.
pub fn is_setup_failure(error: &std::io::Error) -> bool {
    Platform::is_setup_failure(error)
}

/// Whether opening `/dev/fd/N` opens fd N's file anew, with an offset of its own (Linux), so
/// that one sealed file can be passed to every run; where it duplicates fd N instead (macOS,
/// the BSDs: one offset shared by every opener) each run needs its own copy
/// ([`Backend::DEV_FD_REOPENS`](backend::Backend::DEV_FD_REOPENS)).
pub(crate) const DEV_FD_REOPENS: bool = <Platform as Backend>::DEV_FD_REOPENS;

/// A read-only, close-on-exec fd holding `contents`, which no one can change (the engine's
/// shell prelude and long scripts; `name` shows in `/proc/<pid>/fd` where there is one).
pub(crate) fn sealed_file(name: &std::ffi::CStr, contents: &[u8]) -> std::io::Result<OwnedFd> {
    Platform::sealed_file(name, contents)
}

/// A new, empty, read-write, close-on-exec file that exists only as an fd and wakes no one when
/// written (a run's shell-state report); where the platform can (Linux), writes past `bound`
/// bytes fail. See [`Backend::bounded_file`](backend::Backend::bounded_file).
pub(crate) fn bounded_file(name: &std::ffi::CStr, bound: u64) -> std::io::Result<OwnedFd> {
    Platform::bounded_file(name, bound)
}

/// Waiting for the process [`spawn`] started; dropped before the exit, it still reaps it.
pub(crate) struct SpawnedChild(<Platform as Backend>::SpawnedChild);

impl SpawnedChild {
    /// Starts waiting for what [`spawn_watched`] started.
    pub(crate) fn new(spawned: Spawned) -> std::io::Result<SpawnedChild> {
        Platform::watch_child(spawned.pid, spawned.status).map(SpawnedChild)
    }

    /// Waits until the process has exited and is reaped.
    pub(crate) async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        Platform::wait_child(&mut self.0).await
    }
}

/// Makes this process non-dumpable (`PR_SET_DUMPABLE 0`): a command running as the same user
/// can then not open `/proc/<agent>/fd` (the protocol stream), `environ` or `mem`. `serve` does
/// this at start; an embedder should too, early in `main`. It also turns off core dumps of the
/// agent and lets only CAP_SYS_PTRACE attach a debugger. No command holds it: the confined
/// modes run commands in a user namespace, and root's `full`-mode commands lose it (`off`
/// gives up everything).
pub fn protect_agent_process() {
    Platform::protect_agent_process()
}

/// Runs `job` on the thread that starts commands (see [`spawn`]).
pub fn on_spawner_thread(job: Box<dyn FnOnce() + Send>) {
    Platform::on_spawner_thread(job)
}

/// What `mode` lets commands do, then what this machine does not enforce of it (if anything):
/// a short text for a mode picker, which already shows the mode's name.
pub fn describe(mode: Mode) -> String {
    describe_with(mode, Support::current())
}

/// [`describe`] for a given [`Support`].
pub fn describe_with(mode: Mode, support: &Support) -> String {
    Platform::describe(mode, support)
}

/// Whether a mode's sandbox is whole on this machine ([`verdict`], `doctor`'s verdict per mode,
/// and what `--require-sandbox` checks before every command).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Every layer the mode promises works here.
    Holds,
    /// The mode's first promise holds (writes are confined; read-only's network is blocked),
    /// but these layers of it are missing.
    Weakened(Vec<String>),
    /// The mode's first promise does not hold here; these are missing.
    Missing(Vec<String>),
}

impl Verdict {
    /// What is missing (empty when the mode holds).
    pub fn missing(&self) -> &[String] {
        match self {
            Verdict::Holds => &[],
            Verdict::Weakened(gaps) | Verdict::Missing(gaps) => gaps,
        }
    }
}

/// Whether `mode`'s sandbox is whole on this machine.
pub fn verdict(mode: Mode) -> Verdict {
    Platform::verdict(mode, Support::current())
}

/// [`verdict`] for a given [`Support`].
pub fn verdict_with(mode: Mode, support: &Support) -> Verdict {
    Platform::verdict(mode, support)
}

/// Why a `mode` command is refused under `--require-sandbox` (`None`: its sandbox holds
/// here): what is missing, then how to fix it (the advice `doctor` prints).
pub fn refusal(mode: Mode) -> Option<String> {
    refusal_with(mode, Support::current())
}

/// [`refusal`] for a given [`Support`].
pub fn refusal_with(mode: Mode, support: &Support) -> Option<String> {
    let verdict = verdict_with(mode, support);
    let state = match &verdict {
        Verdict::Holds => return None,
        Verdict::Missing(_) => "missing",
        _ => "weakened",
    };
    let mut text = format!(
        "acp-bash refuses to run this command (--require-sandbox): {} mode's sandbox is {state} \
         on this machine. Missing: {}.",
        mode.name(),
        verdict.missing().join("; ")
    );
    let advice = Platform::advice(support);
    if advice.is_empty() {
        text.push_str(
            " `acp-bash doctor` says why each layer is missing and what would enable it.",
        );
    } else {
        text.push_str(" To fix it:");
        for block in advice {
            text.push_str("\n- ");
            text.push_str(&block);
        }
        text.push_str("\n(`acp-bash doctor` shows every layer.)");
    }
    text.push_str(
        " Or start acp-bash without --require-sandbox to run commands with what holds here.",
    );
    Some(text)
}

/// What would enable the missing layers on this machine, each option with its cost (the text
/// `doctor` prints; Ubuntu's AppArmor profile for this binary, a container's options).
pub fn advice() -> Vec<String> {
    Platform::advice(Support::current())
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
    /// Each mode's verdict here (the same modes as `modes`).
    pub verdicts: Vec<(Mode, Verdict)>,
    /// Whether each session's namespaces and view are built once (`Ok(how)`) or once per
    /// command (`Err(why)`).
    pub per_session: Result<String, String>,
    /// What would enable the missing layers here, each option with its cost.
    pub advice: Vec<String>,
}

impl DoctorReport {
    /// Probes now (not the cached [`Support::current`]).
    pub fn probe() -> DoctorReport {
        DoctorReport::from_support(&Support::probe())
    }

    /// The report for `support`.
    pub fn from_support(support: &Support) -> DoctorReport {
        let layers = Platform::layers(support);
        let modes = Mode::ALL
            .into_iter()
            .chain([Mode::Off])
            .map(|m| (m, describe_with(m, support)))
            .collect();
        let verdicts = Mode::ALL
            .into_iter()
            .chain([Mode::Off])
            .map(|m| (m, verdict_with(m, support)))
            .collect();
        DoctorReport {
            layers,
            modes,
            verdicts,
            per_session: Platform::per_session_sandbox(support),
            advice: Platform::advice(support),
        }
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
        match &self.per_session {
            Ok(how) => writeln!(f, "\nPer-session sandbox: in use ({how})")?,
            Err(why) => writeln!(f, "\nPer-session sandbox: not in use: {why}")?,
        }
        if !self.advice.is_empty() {
            writeln!(
                f,
                "\nWhat would enable more here (each option with its cost):"
            )?;
            for block in &self.advice {
                for (i, line) in block.lines().enumerate() {
                    let lead = if i == 0 { "  - " } else { "    " };
                    writeln!(f, "{lead}{line}")?;
                }
            }
        }
        writeln!(f, "\nModes:")?;
        for (mode, line) in &self.modes {
            writeln!(f, "  {:<10} {line}", mode.id())?;
        }
        Ok(())
    }
}

/// The host daemons' socket folders and sockets that workspace and read-only commands do not
/// see on this machine now, each with the one path kept visible inside it (if any). Empty
/// where the platform has no filesystem view.
pub fn masked_host_sockets() -> Vec<(PathBuf, Option<PathBuf>)> {
    Platform::masked_host_sockets()
}

/// What `doctor` says of the package caches of `home` (`None`: no home known): for each one
/// that exists, whether workspace commands get a copy-on-write layer over it here, probed for
/// real, or why not (then it stays read-only for them).
pub fn cache_layer_report(home: Option<&std::path::Path>) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("\nPackage caches in workspace mode (copy-on-write layers):\n");
    let Some(home) = home else {
        out.push_str("  no home folder known: no layers\n");
        return out;
    };
    let verdicts = Platform::cache_layer_verdicts(home);
    if verdicts.is_empty() {
        let _ = writeln!(
            out,
            "  none of {} exists under {}",
            PACKAGE_CACHES.join(", "),
            home.display()
        );
    }
    for (cache, verdict) in verdicts {
        let _ = match verdict {
            Ok(()) => writeln!(out, "  [layer]     {}", cache.display()),
            Err(why) => writeln!(
                out,
                "  [read-only] {}: {why}; installs that fill it fail in workspace mode (use full \
                 mode for them)",
                cache.display()
            ),
        };
    }
    out
}

/// What `doctor` lists after the layers: what workspace and read-only commands do not see on
/// this machine with `protection` (credential files, the agent's folders, host sockets), and
/// whether Git metadata stays read-only.
pub fn masked_report(protection: &Protection) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "\nMasked from workspace and read-only commands here (--allow-read PATH unmasks one, \
         --mask PATH adds one):\n",
    );
    let kind = |p: &std::path::Path| {
        if p.is_dir() {
            "folder, reads as empty"
        } else {
            "file, reads as empty"
        }
    };
    let files = masked_paths(protection);
    if files.is_empty() {
        out.push_str("  credential files: none found\n");
    }
    for path in files {
        let _ = writeln!(out, "  {} ({})", path.display(), kind(&path));
    }
    for (path, keep) in masked_host_sockets() {
        match keep {
            Some(keep) => {
                let _ = writeln!(
                    out,
                    "  {} (host sockets; {} kept)",
                    path.display(),
                    keep.display()
                );
            }
            None => {
                let _ = writeln!(out, "  {} (host sockets)", path.display());
            }
        }
    }
    let _ = writeln!(
        out,
        "\nGit metadata in workspace mode: {}",
        if protection.git_metadata_writable {
            "writable (--allow-git-hooks-and-config-writes)".to_string()
        } else {
            format!(
                ".git/hooks and .git/config read-only in the session folder and in repositories \
                 up to {GIT_SCAN_DEPTH} levels below it"
            )
        }
    );
    out
}

/// What `acp-bash doctor` prints: each layer, whether it works here, and why not.
pub fn doctor_report() -> String {
    DoctorReport::probe().to_string()
}

/// A listening TCP socket bound to `addr` inside the network namespace `netns` (an fd of
/// `/proc/PID/ns/net`), for the agent to accept on from outside it: the bridge between a
/// command's loopback-only namespace and the network proxy ([`crate::netproxy`]). Needs
/// CAP_SYS_ADMIN over the namespace's owning user namespace (root, for the namespaces the
/// sandbox makes as root); its loopback is brought up.
#[cfg(target_os = "linux")]
pub fn listen_in_network_namespace(
    netns: std::os::fd::BorrowedFd<'_>,
    addr: std::net::SocketAddr,
) -> std::io::Result<std::net::TcpListener> {
    linux::listen_in(netns, addr)
}

/// Whether this process's engine sends workspace commands' network through the allowlist
/// proxy ([`crate::exec::EngineConfig::network_proxy`]): what workspace mode's description
/// ([`describe`]) says of the network. Set by `Engine::new`; the last engine made wins.
static WORKSPACE_NETWORK_ALLOWLIST: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Sets what workspace mode's description says of the network: only allowed hosts through
/// the proxy (`true`), or the whole network. `Engine::new` calls it from its configuration.
pub fn set_workspace_network_allowlist(on: bool) {
    WORKSPACE_NETWORK_ALLOWLIST.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether workspace commands' network goes through the allowlist proxy
/// ([`set_workspace_network_allowlist`]).
pub fn workspace_network_allowlist() -> bool {
    WORKSPACE_NETWORK_ALLOWLIST.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether workspace commands' network can go through the proxy here
/// ([`Roots::proxied_network`]): network namespaces work, and the bridge can be made. As root
/// the agent makes each namespace and its listener itself; as an ordinary user the process
/// that creates the namespace inside its own user namespace (a command, or the session's
/// zygote) makes the listener there and passes it back, so user namespaces must work too.
/// `Err`: why not; workspace commands then reach the whole network, and `doctor` says so.
pub fn network_proxied_here(support: &Support) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        support.network_namespace.clone()?;
        // SAFETY: plain getter.
        if unsafe { libc::geteuid() } != 0 {
            // The command (or its zygote) makes the namespace and the listener: the agent
            // makes no namespace of its own.
            return support.user_namespace.clone().map_err(|why| {
                format!(
                    "an ordinary user's commands make their network namespace inside a user \
                     namespace, which does not work here ({why})"
                )
            });
        }
        // Root makes each namespace itself, and without CAP_SYS_ADMIN (rootless podman, a
        // container's default capabilities) may not: its commands would have no network and
        // not run.
        linux::agent_network_namespace()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = support;
        Err("network namespaces are Linux's".into())
    }
}
