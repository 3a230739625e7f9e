//! The execution engine: runs one bash script per call, provider-neutral (no ACP types here).
//!
//! Owns: spawning `bash -c` in its own process group with a parent-death signal, the environment
//! scrub ([`env`]), the per-session working directory ([`Session`]), streaming output in chunks
//! that never split a UTF-8 character or an escape sequence ([`chunk`]), bounded head + tail
//! retention with a full log on disk ([`capture`]), timeouts and cancellation that kill the whole
//! process group. Must not touch: presentation, markers text, ACP.

pub mod env;
pub mod status;

pub use status::{signal_name, signal_number, Exit, RunStatus, Truncation};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::sandbox;

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
    /// The scrubbed environment every command starts from, computed once.
    env: env::PreparedEnv,
}

/// One working context: a root directory and the current directory that `cd` moves.
pub struct Session {
    engine: Engine,
    root: PathBuf,
    cwd: Mutex<PathBuf>,
    mode: Mutex<sandbox::Mode>,
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
        todo!("{config:?}")
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// What the scrub removed from this process's environment (names only).
    pub fn scrubbed(&self) -> &[env::Scrubbed] {
        &self.inner.env.removed
    }

    /// A session rooted at `root`, which must be an absolute path to an existing directory.
    pub fn session(&self, root: &Path) -> Result<Session, SessionError> {
        todo!("{root:?}")
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
        todo!("{request:?} {:?} {:?}", on_output as *const _, cancel)
    }
}
