//! The execution engine: runs one bash script per call, provider-neutral (no ACP types here).
//!
//! Owns: spawning `bash -c` in its own process group with a parent-death signal, the environment
//! scrub ([`env`](mod@env)), the per-session working directory ([`Session`]), streaming output in chunks
//! that never split a UTF-8 character or an escape sequence ([`chunk`]), bounded head + tail
//! retention with a full log on disk ([`capture`]), timeouts and cancellation that kill the whole
//! process group. Must not touch: presentation, markers text, ACP.

pub mod capture;
pub mod chunk;
pub mod env;
mod handle;
pub mod logdir;
mod prelude;
mod process;
mod run;
pub mod status;

pub use handle::RunHandle;
pub use status::{signal_name, signal_number, Exit, RunStatus, Truncation};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

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
}

/// Runs commands; cheap to clone (shared state behind an `Arc`).
#[derive(Clone)]
#[non_exhaustive]
pub struct Engine {
    inner: Arc<EngineInner>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.inner.config)
            .field("bash", &self.inner.bash)
            .finish_non_exhaustive()
    }
}

struct EngineInner {
    config: EngineConfig,
    /// The scrubbed environment every command starts from, computed once: on first use or
    /// by [`Engine::prepare_in_background`] (compiling the credential patterns takes
    /// milliseconds, which the agent's start-up should not wait for).
    env: OnceLock<env::PreparedEnv>,
    /// The variables the scrub starts from (kept: a run may keep one the scrub removed).
    env_source: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// The bash that runs every command.
    bash: PathBuf,
    /// The shell prelude (a sealed memfd), made on first use.
    prelude: OnceLock<Result<prelude::Prelude, String>>,
    /// `config.protection` with the home and the log dir filled in.
    protection: sandbox::Protection,
}

impl EngineInner {
    /// The scrubbed environment; waits for the background scrub if it is still running.
    fn env(&self) -> &env::PreparedEnv {
        self.env
            .get_or_init(|| env::prepare(&self.config.env, self.env_source.iter().cloned()))
    }
}

/// The default [`EngineConfig::session_temp_root`]: per user, under the temp dir.
pub fn default_session_temp_root() -> PathBuf {
    // SAFETY: geteuid cannot fail and has no preconditions.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir().join(format!("acp-bash-tmp-{uid}"))
}

/// Makes the session temp folder `dir` (0700) under `root` (0700, this user's, not a symlink).
fn make_session_temp(root: &Path, dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let _ = std::fs::DirBuilder::new().mode(0o700).create(root);
    let meta = std::fs::symlink_metadata(root).map_err(|e| e.to_string())?;
    // SAFETY: as above.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{} is not a private folder of this user's (a symlink, another user's, or readable \
             by others)",
            root.display()
        ));
    }
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dir)
        .map_err(|e| e.to_string())
}

/// `/bin/bash` when it exists (the common case), else the first `bash` on the commands' PATH.
fn find_bash(vars: &[(std::ffi::OsString, std::ffi::OsString)]) -> PathBuf {
    let standard = PathBuf::from("/bin/bash");
    if standard.is_file() {
        return standard;
    }
    vars.iter()
        .find(|(name, _)| name == "PATH")
        .and_then(|(_, path)| {
            std::env::split_paths(path)
                .map(|dir| dir.join("bash"))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| PathBuf::from("bash"))
}

/// One working context: a root directory and the current directory that `cd` moves.
///
/// Cheap to clone: clones share the session (its cwd, its mode). Runs of one session may overlap
/// ([`Session::start`] never waits for another run); see [`Session::start`] for what that does
/// to the working directory.
#[derive(Clone)]
#[non_exhaustive]
pub struct Session {
    inner: Arc<SessionInner>,
}

struct SessionInner {
    engine: Engine,
    root: PathBuf,
    cwd: Mutex<PathBuf>,
    mode: Mutex<sandbox::Mode>,
    /// The mode whose sandbox notices the session's output last showed: what a mode does not
    /// enforce is said on the first run in that mode, not on every run.
    announced_mode: Mutex<Option<sandbox::Mode>>,
    /// The session's own folder, made on its first workspace command (`None`: it could not be
    /// made, or the engine uses the host's temp dir): `tmp` (its commands' temp dir) and
    /// `caches` (its package caches' copy-on-write layers); removed when the session ends.
    temp: OnceLock<Option<PathBuf>>,
    /// The repositories under the root whose Git metadata is protected, found once.
    git_repos: OnceLock<Vec<PathBuf>>,
}

impl Drop for SessionInner {
    fn drop(&mut self) {
        if let Some(Some(dir)) = self.temp.take() {
            // A build's files can be many: not on the runtime's thread.
            let removed = std::thread::Builder::new()
                .name("acp-bash-tmp-rm".into())
                .spawn(move || {
                    if let Err(error) = sandbox::remove_session_folder(&dir) {
                        tracing::debug!(%error, dir = %dir.display(), "session temp folder");
                    }
                });
            if let Err(error) = removed {
                tracing::debug!(%error, "no thread to remove the session temp folder");
            }
        }
    }
}

impl SessionInner {
    /// What this session's commands run against in `mode` (see [`sandbox::Roots`]).
    fn roots(&self, mode: sandbox::Mode) -> sandbox::Roots {
        let config = &self.engine.inner.config;
        let mut roots = sandbox::Roots::new(self.root.clone(), std::env::temp_dir());
        if mode != sandbox::Mode::Workspace && mode != sandbox::Mode::ReadOnly {
            return roots;
        }
        let mut protection = self.engine.inner.protection.clone();
        if mode == sandbox::Mode::Workspace {
            let temp = self.temp.get_or_init(|| {
                let root = config.session_temp_root.as_ref()?;
                static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let dir = root.join(format!("session-{}-{n}", std::process::id()));
                match make_session_temp(root, &dir).and_then(|()| {
                    // `tmp`: the commands' temp dir; `caches`: the package caches' layers
                    // (out of the commands' sight).
                    use std::os::unix::fs::DirBuilderExt;
                    for sub in ["tmp", "caches"] {
                        std::fs::DirBuilder::new()
                            .mode(0o700)
                            .create(dir.join(sub))
                            .map_err(|e| e.to_string())?;
                    }
                    Ok(())
                }) {
                    Ok(()) => Some(dir),
                    Err(error) => {
                        tracing::warn!(%error, "no private temp folder for the session: its commands share the host's");
                        None
                    }
                }
            });
            roots.session_temp = temp.as_ref().map(|dir| dir.join("tmp"));
            roots.cache_layer = temp.as_ref().map(|dir| dir.join("caches"));
            if !protection.git_metadata_writable {
                protection.git_repos = self
                    .git_repos
                    .get_or_init(|| sandbox::find_git_repos(&self.root))
                    .clone();
            }
        }
        roots.protection = protection;
        roots
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("root", &self.inner.root)
            .field("cwd", &self.cwd())
            .field("mode", &self.mode())
            .finish_non_exhaustive()
    }
}

/// What to run: the script, plus per-run overrides of the session's and engine's settings.
///
/// Build it with [`RunRequest::new`] and the builder methods; every field set is honoured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunRequest {
    /// The bash script, passed to `bash -c` unchanged.
    pub script: String,
    /// Overrides the engine's default timeout for this run.
    pub timeout: Option<Duration>,
    /// Runs in this directory instead of the session's cwd, without moving the session: a `cd`
    /// inside this run is not remembered. Relative paths are taken from the session's cwd.
    pub cwd: Option<PathBuf>,
    /// Runs in this sandbox mode instead of the session's.
    pub sandbox_mode: Option<sandbox::Mode>,
    /// Variables kept from the engine's source environment for this run even though the scrub
    /// removed them (exact names; a name the source does not have is ignored).
    pub env_keep: Vec<String>,
    /// Variables set for this run (they win over every other value).
    pub env_set: Vec<(String, String)>,
    /// Bytes of output kept for the outcome (half from the start, half from the end) instead of
    /// the engine's `keep_head_bytes` + `keep_tail_bytes`.
    pub output_limit: Option<usize>,
    /// Bytes of output sent to the run's live stream ([`RunHandle`]) before it stops (the chunk
    /// that crosses the limit is still sent, so a reader can tell); all of it when `None`.
    pub live_limit: Option<usize>,
}

impl RunRequest {
    /// A request to run `script` with every setting taken from the session and engine.
    pub fn new(script: impl Into<String>) -> Self {
        RunRequest {
            script: script.into(),
            ..RunRequest::default()
        }
    }

    /// Sets [`RunRequest::timeout`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets [`RunRequest::cwd`] (not persisted).
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Sets [`RunRequest::sandbox_mode`].
    pub fn sandbox_mode(mut self, mode: sandbox::Mode) -> Self {
        self.sandbox_mode = Some(mode);
        self
    }

    /// Adds a name to [`RunRequest::env_keep`].
    pub fn keep_env(mut self, name: impl Into<String>) -> Self {
        self.env_keep.push(name.into());
        self
    }

    /// Adds a variable to [`RunRequest::env_set`].
    pub fn set_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env_set.push((name.into(), value.into()));
        self
    }

    /// Sets [`RunRequest::output_limit`].
    pub fn output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = Some(bytes);
        self
    }

    /// Sets [`RunRequest::live_limit`].
    pub fn live_limit(mut self, bytes: usize) -> Self {
        self.live_limit = Some(bytes);
        self
    }
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RunOutcome {
    /// The output kept for the result: all of it, or head + tail around a gap line.
    pub output: String,
    /// How the run ended (exit, timeout, cancellation, truncation).
    pub status: RunStatus,
    /// The directory the command started in.
    pub cwd: PathBuf,
    /// The directory the next command of the session will start in (as this run left it).
    pub next_cwd: PathBuf,
    /// Everything the engine said about the run that is not the command's output
    /// (a deleted cwd, a sandbox layer that is off): also written into `output`.
    pub notices: Vec<String>,
    /// How long the run took, start to reaped.
    pub duration: Duration,
}

impl RunOutcome {
    /// The exit code, when the shell exited (rather than being killed by a signal).
    pub fn exit_code(&self) -> Option<i32> {
        self.status.exit_code()
    }

    /// The signal that killed the shell, by name (`SIGKILL`), when one did.
    pub fn signal(&self) -> Option<String> {
        self.status.signal()
    }

    /// Exit code 0, and neither cancelled nor timed out.
    pub fn success(&self) -> bool {
        self.status.success()
    }
}

impl Engine {
    /// An engine whose commands start from this process's environment, scrubbed by `config.env`.
    pub fn new(config: EngineConfig) -> Self {
        Engine::with_environment(config, std::env::vars_os())
    }

    /// An engine whose commands start from `vars` (instead of this process's environment),
    /// scrubbed by `config.env`.
    pub fn with_environment(
        config: EngineConfig,
        vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    ) -> Self {
        let vars: Vec<_> = vars.into_iter().collect();
        let bash = find_bash(&vars);
        let mut protection = config.protection.clone();
        if protection.home.is_none() {
            protection.home = vars
                .iter()
                .find(|(name, _)| name == "HOME")
                .map(|(_, home)| PathBuf::from(home))
                .filter(|home| home.is_absolute());
        }
        protection.agent_dirs.push(config.log_dir.clone());
        let inner = Arc::new(EngineInner {
            config,
            env: OnceLock::new(),
            env_source: vars,
            bash,
            prelude: OnceLock::new(),
            protection,
        });
        Engine { inner }
    }

    /// What workspace and read-only commands of this engine never see: its config's
    /// [`EngineConfig::protection`] with the home of its environment and its log folder added.
    pub fn protection(&self) -> &sandbox::Protection {
        &self.inner.protection
    }

    /// Does the engine's one-time work (the environment scrub, the sandbox probe) on a
    /// background thread now, so the first command does not wait for it. Without this call it
    /// happens on first use. An agent calls it once it has answered `initialize`: earlier, on a
    /// small machine, the work would compete with start-up for the CPU.
    pub fn prepare_in_background(&self) {
        let inner = Arc::downgrade(&self.inner);
        let spawned = std::thread::Builder::new()
            .name("acp-bash-prepare".into())
            .spawn(move || {
                if let Some(inner) = inner.upgrade() {
                    inner.env();
                }
                sandbox::Support::current();
            });
        if let Err(error) = spawned {
            tracing::debug!(%error, "no thread to prepare the engine early; it will on first use");
        }
    }

    /// The settings this engine was made with.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// What the scrub removed from this process's environment (names only).
    pub fn scrubbed(&self) -> &[env::Scrubbed] {
        &self.inner.env().removed
    }

    /// A session rooted at `root`, which must be an absolute path to an existing directory.
    pub fn session(&self, root: &Path) -> Result<Session, SessionError> {
        if !root.is_absolute() {
            return Err(SessionError::NotAbsolute(root.to_path_buf()));
        }
        if !root.is_dir() {
            return Err(SessionError::NotADirectory(root.to_path_buf()));
        }
        Ok(Session {
            inner: Arc::new(SessionInner {
                engine: self.clone(),
                root: root.to_path_buf(),
                cwd: Mutex::new(root.to_path_buf()),
                mode: Mutex::new(self.inner.config.sandbox_mode),
                announced_mode: Mutex::new(None),
                temp: OnceLock::new(),
                git_repos: OnceLock::new(),
            }),
        })
    }

    /// The shell prelude, made on first use.
    fn prelude(&self) -> Result<&prelude::Prelude, String> {
        self.inner
            .prelude
            .get_or_init(|| {
                prelude::Prelude::new().map_err(|error| {
                    format!("acp-bash could not prepare the shell prelude (memfd_create): {error}")
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Why a session could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionError {
    /// The root is a relative path.
    NotAbsolute(PathBuf),
    /// The root does not exist or is not a directory.
    NotADirectory(PathBuf),
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionError::NotAbsolute(path) => {
                write!(f, "cwd must be an absolute path, got {:?}", path)
            }
            SessionError::NotADirectory(path) => {
                write!(
                    f,
                    "cwd must be an existing directory, {:?} is not one",
                    path
                )
            }
        }
    }
}

impl std::error::Error for SessionError {}

impl Session {
    /// The directory the session was made for (its workspace).
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// Where the next command starts.
    pub fn cwd(&self) -> PathBuf {
        self.inner.cwd.lock().unwrap().clone()
    }

    /// Moves where the next command starts (a restored session's directory). The engine checks
    /// it before each run, as it does for one a `cd` left: a directory that is gone is reported.
    pub fn restore_cwd(&self, cwd: PathBuf) {
        *self.inner.cwd.lock().unwrap() = cwd;
    }

    /// The sandbox mode of the session's next commands.
    pub fn mode(&self) -> sandbox::Mode {
        *self.inner.mode.lock().unwrap()
    }

    /// Sets the sandbox mode for the session's next commands.
    pub fn set_mode(&self, mode: sandbox::Mode) {
        *self.inner.mode.lock().unwrap() = mode;
    }

    /// The engine this session runs on.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Starts `request` on a task of the current tokio runtime and returns at once.
    ///
    /// The [`RunHandle`] streams the output, cancels, and waits for the [`RunOutcome`]; dropping
    /// it (or any future that owns it) kills the command's whole process group. The run's own
    /// timeout applies whether or not anyone reads the output or waits.
    ///
    /// Concurrent runs of one session run side by side (nothing waits): each starts in the
    /// session's cwd as it is when it starts; a run whose command changed directory moves the
    /// session's cwd when it ends, so of two runs that `cd`, the one that ends last wins; a run
    /// that did not change directory (or ran with [`RunRequest::cwd`]) leaves the cwd alone.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn start(&self, request: RunRequest) -> RunHandle {
        run::start(self.clone(), request)
    }

    /// Runs `request` to the end, calling `on_output` with each chunk of output as it arrives
    /// (valid UTF-8, never ending inside a character or an escape sequence). Cancelling `cancel`
    /// kills the run. Never fails: a run that could not start reports why in its output.
    ///
    /// A thin wrapper over [`Session::start`]: dropping this future kills the command.
    pub async fn run(
        &self,
        request: RunRequest,
        on_output: &mut (dyn FnMut(&str) + Send),
        cancel: &CancellationToken,
    ) -> RunOutcome {
        let mut handle = self.start(request);
        let mut cancelled = false;
        loop {
            tokio::select! {
                chunk = handle.next_output() => match chunk {
                    Some(chunk) => on_output(&chunk),
                    None => break,
                },
                () = cancel.cancelled(), if !cancelled => {
                    cancelled = true;
                    handle.cancel();
                }
            }
        }
        handle.wait().await
    }
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

    /// Sets [`EngineConfig::session_temp_root`].
    pub fn session_temp_root(mut self, root: Option<PathBuf>) -> Self {
        self.session_temp_root = root;
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
            session_temp_root: Some(default_session_temp_root()),
        }
    }
}
