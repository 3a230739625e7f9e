//! One working context: [`Session`] (a root, the current directory that `cd` moves, the
//! sandbox mode) and why one could not be made ([`SessionError`]). Must not touch: how a run
//! goes (that is `run`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

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
    /// The session's own folder, made on its first workspace command (`None`: it could not be
    /// made, or the engine uses the host's temp dir): `tmp` (its commands' temp dir) and
    /// `caches` (its package caches' copy-on-write layers); removed when the session ends.
    pub(super) temp: OnceLock<Option<PathBuf>>,
    /// The repositories under the root whose Git metadata is protected, found once.
    pub(super) git_repos: OnceLock<Vec<PathBuf>>,
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
    pub(super) fn roots(&self, mode: sandbox::Mode) -> sandbox::Roots {
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
        handle
            .drain(&mut |chunk: String| on_output(&chunk), cancel)
            .await;
        handle.wait().await
    }
}
