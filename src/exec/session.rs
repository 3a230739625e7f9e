//! One working context: [`Session`] (a root, the current directory that `cd` moves, the
//! sandbox mode) and why one could not be made ([`SessionError`]). Must not touch: how a run
//! goes (that is `run`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::{run, Engine, RunHandle, RunOutcome, RunRequest};
use crate::sandbox;

/// One working context: a root directory and the current directory that `cd` moves.
///
/// Cheap to clone: clones share the session (its cwd, its mode). Runs of one session may overlap
/// ([`Session::start`] never waits for another run); see [`Session::start`] for what that does
/// to the working directory.
#[derive(Clone)]
#[non_exhaustive]
pub struct Session {
    pub(super) inner: Arc<SessionInner>,
}

pub(super) struct SessionInner {
    pub(super) engine: Engine,
    pub(super) root: PathBuf,
    pub(super) cwd: Mutex<PathBuf>,
    pub(super) mode: Mutex<sandbox::Mode>,
    /// The mode whose sandbox notices the session's output last showed: what a mode does not
    /// enforce is said on the first run in that mode, not on every run.
    pub(super) announced_mode: Mutex<Option<sandbox::Mode>>,
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
