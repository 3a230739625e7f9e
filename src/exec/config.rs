//! The engine's settings: [`EngineConfig`] (timeouts, output and log bounds, the sandbox mode and
//! limits, the environment policy). Must not touch: what uses them.

use std::path::PathBuf;
use std::time::Duration;

use super::{env, logdir};
use crate::sandbox;

/// Settings shared by every session of one engine.
///
/// Start from [`EngineConfig::default`] and change the fields you need (the struct is
/// `#[non_exhaustive]`: it may gain fields without breaking you).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EngineConfig {
    /// Timeout for a run whose request names none.
    pub default_timeout: Duration,
    /// What the environment scrub removes, keeps and sets.
    pub env: env::EnvPolicy,
    /// Bytes of output kept from the start and from the end of a run; the middle is dropped
    /// (and the full output written to a log file) once a run prints more than both together.
    pub keep_head_bytes: usize,
    /// Bytes of output kept from the end of a run (see `keep_head_bytes`).
    pub keep_tail_bytes: usize,
    /// Where full logs of truncated runs are written (created on demand).
    pub log_dir: PathBuf,
    /// A log stops at this many bytes; the result then says it holds only the first part.
    pub max_log_bytes: u64,
    /// The most the logs in `log_dir` may take together: the oldest go first.
    pub log_budget_bytes: u64,
    /// No log is started while the disk holding `log_dir` has less than this free (`None`:
    /// the smaller of 1 GiB and 5% of the disk), and a log never eats into it.
    pub log_disk_reserve: Option<u64>,
    /// After SIGTERM, how long the process group has before SIGKILL.
    pub kill_grace: Duration,
    /// After the shell exits, how long to keep reading from grandchildren that still hold the
    /// output pipe before killing what is left of the group.
    pub pipe_grace: Duration,
    /// The sandbox mode a new session starts in.
    pub sandbox_mode: sandbox::Mode,
    /// Per-command resource limits (processes, memory).
    pub limits: sandbox::Limits,
    /// What workspace and read-only commands never see (credential files, the agent's own
    /// files) and whether Git metadata stays read-only. The engine adds the home of its
    /// environment (`HOME`) when none is set, and `log_dir` to the agent's folders.
    pub protection: sandbox::Protection,
    /// Where each session's own temp folder is made (mode 0700), the one its workspace
    /// commands see as the temp dir and `/tmp`, removed when the session ends (`None`: the
    /// host's temp dir, shared with every process).
    pub session_temp_root: Option<PathBuf>,
    /// Track what each workspace-mode command changed in the session folder
    /// ([`crate::changes`]): the agent turns it on unless started with `--no-changes`.
    pub track_changes: bool,
    /// The program each session's sandbox zygote is started from (it holds the session's
    /// namespaces and view; `notes/2026-12-01-session-zygote.md`): an `acp-bash` binary of
    /// this very build. `None`: this program itself, when its `main` calls
    /// [`sandbox::zygote_main_if_asked`] first (the `acp-bash` binary does); otherwise every
    /// command builds its own namespaces.
    pub zygote_program: Option<PathBuf>,
    /// Whether a command with nothing to confine (`--sandbox off`, or no sandbox layer works
    /// here) is forked on the thread that polls its start, as tokio's own `Command` does,
    /// instead of on the sandbox's spawner thread: two thread hand-offs less per command
    /// (0.05–0.15 ms on the benchmarks' machine, `notes/2026-12-03-bare-fork-in-place.md`).
    /// A command's parent-death signal (SIGKILL) is tied to the **thread** that forked it, so
    /// set this only where every thread that polls this engine's runs outlives the commands
    /// it starts: a multi-thread runtime's workers and the thread in its `block_on` do, until
    /// the runtime shuts down (the `acp-bash` binary sets it); a `spawn_blocking` thread does
    /// not (it exits when idle, and its commands with it). Default `false`.
    pub fork_bare_commands_in_place: bool,
    /// How many sessions keep their sandbox helpers (a zygote per mode) between commands: the
    /// ones that ran a command most recently; of those, only the two used last also keep a
    /// spare PID 1, so at most this + 2 helper processes per mode. The others' helpers end,
    /// and their next command starts them again as a first command does
    /// (`notes/2026-12-06-economy.md`, `notes/2026-12-06-economy-spares.md`). Default 8.
    pub max_warm_sessions: usize,
    /// How long a session keeps its helpers after its last command. Default 5 minutes.
    pub warm_idle: Duration,
    /// Refuse to run a command in a mode whose sandbox is not whole here
    /// ([`sandbox::verdict`] is not [`sandbox::Verdict::Holds`]): the command does not run,
    /// and its output names what is missing and how to fix it. Default `false`: such a
    /// command runs with what holds, and the session's first command in that mode says what
    /// is missing, once.
    pub require_sandbox: bool,
    /// Tests only: build the view as on a kernel without `mount_setattr` (Linux 5.10, 5.11:
    /// one `mount(MS_REMOUNT | MS_BIND)` per mount point) where the kernel has it too, so that
    /// the sandbox's tests prove both ways on one machine. Where the kernel lacks it, the view
    /// is built that way whatever this says. Default `false`.
    #[doc(hidden)]
    pub view_without_mount_setattr: bool,
    /// Workspace mode's network allowlist: commands run in a network namespace with only a
    /// loopback, bridged to this proxy, which reaches only the hosts its rules allow
    /// ([`crate::netproxy`]; the agent's default). `None`: workspace commands reach the whole
    /// network (`--network full`). Needs a tokio runtime where sessions are made.
    pub network_proxy: Option<crate::netproxy::Proxy>,
}

impl EngineConfig {
    /// Sets [`EngineConfig::default_timeout`].
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// Sets [`EngineConfig::env`].
    pub fn env(mut self, env: env::EnvPolicy) -> Self {
        self.env = env;
        self
    }

    /// Sets [`EngineConfig::keep_head_bytes`] and [`EngineConfig::keep_tail_bytes`].
    pub fn keep_bytes(mut self, head: usize, tail: usize) -> Self {
        self.keep_head_bytes = head;
        self.keep_tail_bytes = tail;
        self
    }

    /// Sets [`EngineConfig::log_dir`].
    pub fn log_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.log_dir = dir.into();
        self
    }

    /// Sets [`EngineConfig::max_log_bytes`].
    pub fn max_log_bytes(mut self, bytes: u64) -> Self {
        self.max_log_bytes = bytes;
        self
    }

    /// Sets [`EngineConfig::log_budget_bytes`].
    pub fn log_budget_bytes(mut self, bytes: u64) -> Self {
        self.log_budget_bytes = bytes;
        self
    }

    /// Sets [`EngineConfig::log_disk_reserve`].
    pub fn log_disk_reserve(mut self, bytes: Option<u64>) -> Self {
        self.log_disk_reserve = bytes;
        self
    }

    /// Sets [`EngineConfig::limits`]: the per-command resource limits.
    pub fn limits(mut self, limits: sandbox::Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets [`EngineConfig::kill_grace`].
    pub fn kill_grace(mut self, grace: Duration) -> Self {
        self.kill_grace = grace;
        self
    }

    /// Sets [`EngineConfig::pipe_grace`].
    pub fn pipe_grace(mut self, grace: Duration) -> Self {
        self.pipe_grace = grace;
        self
    }

    /// Sets [`EngineConfig::protection`].
    pub fn protection(mut self, protection: sandbox::Protection) -> Self {
        self.protection = protection;
        self
    }

    /// Sets [`EngineConfig::max_warm_sessions`] and [`EngineConfig::warm_idle`].
    pub fn warm_sessions(mut self, max: usize, idle: Duration) -> Self {
        self.max_warm_sessions = max;
        self.warm_idle = idle;
        self
    }

    /// Sets [`EngineConfig::track_changes`].
    pub fn track_changes(mut self, on: bool) -> Self {
        self.track_changes = on;
        self
    }

    /// Sets [`EngineConfig::session_temp_root`].
    pub fn session_temp_root(mut self, root: Option<PathBuf>) -> Self {
        self.session_temp_root = root;
        self
    }

    /// Sets [`EngineConfig::zygote_program`].
    pub fn zygote_program(mut self, program: Option<PathBuf>) -> Self {
        self.zygote_program = program;
        self
    }

    /// Sets [`EngineConfig::fork_bare_commands_in_place`].
    pub fn fork_bare_commands_in_place(mut self, in_place: bool) -> Self {
        self.fork_bare_commands_in_place = in_place;
        self
    }

    /// Sets [`EngineConfig::view_without_mount_setattr`] (tests only).
    #[doc(hidden)]
    pub fn view_without_mount_setattr(mut self, classic: bool) -> Self {
        self.view_without_mount_setattr = classic;
        self
    }

    /// Sets [`EngineConfig::network_proxy`].
    pub fn network_proxy(mut self, proxy: Option<crate::netproxy::Proxy>) -> Self {
        self.network_proxy = proxy;
        self
    }

    /// Sets [`EngineConfig::sandbox_mode`].
    pub fn sandbox_mode(mut self, mode: sandbox::Mode) -> Self {
        self.sandbox_mode = mode;
        self
    }
}

impl Default for EngineConfig {
    /// The agent's defaults: 10-minute timeout, 32 KiB head + 32 KiB tail kept, scrub on,
    /// `workspace` sandbox, logs under the temp dir.
    fn default() -> Self {
        EngineConfig {
            default_timeout: Duration::from_secs(600),
            env: env::EnvPolicy::standard(),
            keep_head_bytes: 32 * 1024,
            keep_tail_bytes: 32 * 1024,
            log_dir: logdir::default_dir(),
            max_log_bytes: 256 << 20,
            log_budget_bytes: 2 << 30,
            log_disk_reserve: None,
            kill_grace: Duration::from_secs(1),
            pipe_grace: Duration::from_secs(1),
            sandbox_mode: sandbox::Mode::default(),
            limits: sandbox::Limits::default(),
            protection: sandbox::Protection::default(),
            session_temp_root: Some(super::default_session_temp_root()),
            track_changes: false,
            zygote_program: None,
            fork_bare_commands_in_place: false,
            max_warm_sessions: 8,
            warm_idle: Duration::from_secs(300),
            require_sandbox: false,
            view_without_mount_setattr: false,
            network_proxy: None,
        }
    }
}
