//! The execution engine: runs one bash script per call, provider-neutral (no ACP types here).
//!
//! Owns: spawning `bash -c` in its own process group with a parent-death signal, the environment
//! scrub ([`env`]), the per-session working directory ([`Session`]), streaming output in chunks
//! that never split a UTF-8 character or an escape sequence ([`chunk`]), bounded head + tail
//! retention with a full log on disk ([`capture`]), timeouts and cancellation that kill the whole
//! process group. Must not touch: presentation, markers text, ACP.

pub mod capture;
pub mod chunk;
pub mod env;
pub mod logdir;
mod prelude;
mod private_dir;
mod process;
mod run;
pub mod status;

pub use status::{signal_name, signal_number, Exit, RunStatus, Truncation};

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::sandbox;
use private_dir::PrivateDir;

/// Settings shared by every session of one engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Timeout for a run whose request names none.
    pub default_timeout: Duration,
    /// What the environment scrub removes, keeps and sets.
    pub env: env::EnvPolicy,
    /// Bytes of output kept from the start and from the end of a run; the middle is dropped
    /// (and the full output written to a log file) once a run prints more than both together.
    pub keep_head_bytes: usize,
    pub keep_tail_bytes: usize,
    /// Where full logs of truncated runs are written (created on demand).
    pub log_dir: PathBuf,
    /// After SIGTERM, how long the process group has before SIGKILL.
    pub kill_grace: Duration,
    /// After the shell exits, how long to keep reading from grandchildren that still hold the
    /// output pipe before killing what is left of the group.
    pub pipe_grace: Duration,
    /// The sandbox mode a new session starts in.
    pub sandbox_mode: sandbox::Mode,
}

/// Runs commands; cheap to clone (shared state behind an `Arc`).
#[derive(Clone)]
pub struct Engine {
    inner: Arc<EngineInner>,
}

struct EngineInner {
    config: EngineConfig,
    /// The scrubbed environment every command starts from, computed once: on first use or
    /// by [`Engine::prepare_in_background`] (compiling the credential patterns takes
    /// milliseconds, which the agent's start-up should not wait for).
    env: OnceLock<env::PreparedEnv>,
    /// The variables the scrub starts from, until it has run.
    env_source: Mutex<Option<Vec<(std::ffi::OsString, std::ffi::OsString)>>>,
    /// The bash that runs every command.
    bash: PathBuf,
    private_dir: OnceLock<Result<PrivateDir, String>>,
    /// Numbers runs, for unique per-run file names.
    runs: AtomicU64,
}

impl EngineInner {
    /// The scrubbed environment; waits for the background scrub if it is still running.
    fn env(&self) -> &env::PreparedEnv {
        self.env.get_or_init(|| {
            let vars = self.env_source.lock().unwrap().take().unwrap_or_default();
            env::prepare(&self.config.env, vars)
        })
    }
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
pub struct Session {
    engine: Engine,
    root: PathBuf,
    cwd: Mutex<PathBuf>,
    mode: Mutex<sandbox::Mode>,
    /// The mode whose sandbox notices the session's output last showed: what a mode does not
    /// enforce is said on the first run in that mode, not on every run.
    announced_mode: Mutex<Option<sandbox::Mode>>,
}

/// What to run.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The bash script, passed to `bash -c` unchanged.
    pub script: String,
    /// Overrides the engine's default timeout for this run.
    pub timeout: Option<Duration>,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The output kept for the result: all of it, or head + tail around a gap line.
    pub output: String,
    pub status: RunStatus,
    /// The directory the command started in.
    pub cwd: PathBuf,
    /// The directory the next command of the session will start in.
    pub next_cwd: PathBuf,
    /// Everything the engine said about the run that is not the command's output
    /// (a deleted cwd, a sandbox layer that is off): also written into `output`.
    pub notices: Vec<String>,
    pub duration: Duration,
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
        let inner = Arc::new(EngineInner {
            config,
            env: OnceLock::new(),
            env_source: Mutex::new(Some(vars)),
            bash,
            private_dir: OnceLock::new(),
            runs: AtomicU64::new(0),
        });
        Engine { inner }
    }

    /// Does the engine's one-time work (the environment scrub, the sandbox probe, removing the
    /// private directories of agents that were killed) on a background thread now, so the first command does not wait for it. Without this call it
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
                private_dir::remove_abandoned(&std::env::temp_dir());
            });
        if let Err(error) = spawned {
            tracing::debug!(%error, "no thread to prepare the engine early; it will on first use");
        }
    }

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
            engine: self.clone(),
            root: root.to_path_buf(),
            cwd: Mutex::new(root.to_path_buf()),
            mode: Mutex::new(self.inner.config.sandbox_mode),
            announced_mode: Mutex::new(None),
        })
    }

    /// The private directory (mode 0700) holding the prelude and the per-run cwd files,
    /// made on first use.
    fn private_dir(&self) -> Result<&PrivateDir, String> {
        self.inner
            .private_dir
            .get_or_init(PrivateDir::create)
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Why a session could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionError {
    NotAbsolute(PathBuf),
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
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the next command starts.
    pub fn cwd(&self) -> PathBuf {
        self.cwd.lock().unwrap().clone()
    }

    pub fn mode(&self) -> sandbox::Mode {
        *self.mode.lock().unwrap()
    }

    /// Sets the sandbox mode for the session's next commands.
    pub fn set_mode(&self, mode: sandbox::Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    /// Runs `request` to the end, calling `on_output` with each chunk of output as it arrives
    /// (valid UTF-8, never ending inside a character or an escape sequence). Cancelling `cancel`
    /// kills the run. Never fails: a run that could not start reports why in its output.
    pub async fn run(
        &self,
        request: RunRequest,
        on_output: &mut (dyn FnMut(&str) + Send),
        cancel: &CancellationToken,
    ) -> RunOutcome {
        run::run(self, request, &mut |_| {}, on_output, cancel).await
    }

    /// Like [`Self::run`], and calls `on_start` once with the process id of the shell (the
    /// process group the engine signals) as soon as it has started. A run whose shell never
    /// started does not call it.
    pub async fn run_observed(
        &self,
        request: RunRequest,
        on_start: &mut (dyn FnMut(u32) + Send),
        on_output: &mut (dyn FnMut(&str) + Send),
        cancel: &CancellationToken,
    ) -> RunOutcome {
        run::run(self, request, on_start, on_output, cancel).await
    }

    /// A session that starts where this one is now (same root, current directory and sandbox
    /// mode) but whose runs do not move this one: its `cd`s and mode changes stay its own.
    /// A background job runs in one, so that its ending does not move the session's directory.
    pub fn detached(&self) -> Session {
        Session {
            engine: self.engine.clone(),
            root: self.root.clone(),
            cwd: Mutex::new(self.cwd()),
            mode: Mutex::new(self.mode()),
            announced_mode: Mutex::new(*self.announced_mode.lock().unwrap()),
        }
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
            kill_grace: Duration::from_secs(1),
            pipe_grace: Duration::from_secs(1),
            sandbox_mode: sandbox::Mode::default(),
        }
    }
}
