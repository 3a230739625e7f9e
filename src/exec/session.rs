//! One working context: [`Session`] (a root, the current directory that `cd` moves, the shell
//! state that carries over with it, the sandbox mode) and why one could not be made
//! ([`SessionError`]). Must not touch: how a run goes (that is `run`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use tokio_util::sync::CancellationToken;

use std::ffi::{OsStr, OsString};

use super::shell_state::{self, Owned, ShellState};
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
    /// The exported variables and previous directory the next command starts with.
    pub(super) shell: Mutex<ShellState>,
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
    /// The session's zygotes (its namespaces and view, built once per mode): they end when
    /// the session does.
    pub(super) sandbox: Arc<sandbox::SessionSandbox>,
    /// [`Session::prepare_sandbox`] was called: each mode [`Session::set_mode`] changes to gets
    /// its sandbox built in the background too.
    pub(super) sandbox_early: std::sync::atomic::AtomicBool,
    /// The session folder's change tracker, started once ([`Session::changes`]).
    pub(super) changes: OnceLock<Option<Arc<crate::changes::ChangeTracker>>>,
}

impl Drop for SessionInner {
    fn drop(&mut self) {
        if let Some(Some(dir)) = self.temp.take() {
            // The session's kept plans (and their Landlock fds) go with it.
            sandbox::forget_session(&dir);
            // A build's files can be many: not on the runtime's thread.
            super::leftovers::session_ended(dir);
        }
    }
}

impl SessionInner {
    /// What this session's commands run against in `mode` (see [`sandbox::Roots`]).
    pub(super) fn roots(&self, mode: sandbox::Mode) -> sandbox::Roots {
        let config = &self.engine.inner.config;
        let mut roots = sandbox::Roots::new(self.root.clone(), std::env::temp_dir());
        roots.view_without_mount_setattr = config.view_without_mount_setattr;
        if mode != sandbox::Mode::Workspace && mode != sandbox::Mode::ReadOnly {
            return roots;
        }
        let mut protection = self.engine.inner.protection.clone();
        if mode == sandbox::Mode::Workspace {
            roots.proxied_network = config.network_proxy.is_some();
            let temp = self.temp.get_or_init(|| {
                let root = config.session_temp_root.as_ref()?;
                static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // Random too: a pid is reused, and an agent that was killed leaves its folders.
                let mut salt = [0u8; 4];
                crate::random::random_bytes(&mut salt);
                let salt: String = salt.iter().map(|b| format!("{b:02x}")).collect();
                let dir = root.join(format!("session-{}-{n}-{salt}", std::process::id()));
                let made = make_session_temp(root, &dir);
                if made.is_ok() {
                    super::leftovers::made(&dir);
                }
                match made.and_then(|()| {
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

impl SessionInner {
    /// The names no run of this session captures, besides a run's own (see
    /// [`shell_state::ENGINE_OWNED`]).
    fn owned<'a>(&'a self, request: Option<&'a RunRequest>) -> Owned<'a> {
        let policy = &self.engine.inner.config.env;
        Owned {
            set_list: super::env::ALWAYS_SET
                .iter()
                .map(|(name, _)| *name)
                .chain(policy.set.iter().map(|(name, _)| name.as_str()))
                .collect(),
            per_run: request.map_or_else(Vec::new, |request| {
                request
                    .env_set
                    .iter()
                    .map(|(name, _)| name.as_str())
                    .chain(request.env_keep.iter().map(String::as_str))
                    .collect()
            }),
        }
    }

    /// The values of the variables the scrub removed from the engine's environment: none of
    /// them is ever taken as the session's state, under any name.
    pub(super) fn scrubbed_values(&self) -> Vec<&OsStr> {
        let engine = &self.engine.inner;
        engine
            .env()
            .removed
            .iter()
            .filter_map(|removed| {
                engine
                    .env_source
                    .iter()
                    .find(|(name, _)| name.to_str() == Some(removed.name.as_str()))
                    .map(|(_, value)| value.as_os_str())
            })
            .filter(|value| !value.is_empty())
            .collect()
    }

    /// The variables of the engine's environment a command could change (made once per
    /// engine: neither its environment nor the names it owns change).
    fn base(&self) -> &std::collections::BTreeMap<String, OsString> {
        let engine = &self.engine.inner;
        engine
            .base
            .get_or_init(|| shell_state::changeable(&engine.env().vars, &self.owned(None)))
    }

    /// Takes what a run that started with `start_env` (its whole environment) exported at its
    /// end into the session's state: each variable it changed, name by name, within the bounds.
    /// Returns what to tell the user (nothing when all went as the command meant).
    pub(super) fn take_exported(
        &self,
        request: &RunRequest,
        start_env: &[(OsString, OsString)],
        exported: Option<Result<std::collections::BTreeMap<String, OsString>, String>>,
    ) -> Vec<String> {
        let keep = "the session's exported variables stay as they were";
        let end = match exported {
            None => return Vec::new(),
            Some(Err(why)) => return vec![format!("{why}: {keep}")],
            Some(Ok(end)) => end,
        };
        let owned = self.owned(Some(request));
        let start = shell_state::changeable(start_env, &owned);
        let previous =
            |vars: &std::collections::BTreeMap<String, OsString>| vars.get("OLDPWD").cloned();
        let (oldpwd_before, oldpwd_after) = (
            start_env
                .iter()
                .find(|(name, _)| name == "OLDPWD")
                .map(|(_, value)| value.clone()),
            previous(&end),
        );
        let end = end
            .into_iter()
            .filter(|(name, _)| is_changeable(name, &owned))
            .collect();
        let scrubbed_values = self.scrubbed_values();
        let changes = shell_state::changes(&start, &end, &scrubbed_values);
        let mut notices = Vec::new();
        if !changes.scrubbed.is_empty() {
            notices.push(format!(
                "not carried over to the next command: {} (the value of a variable the \
                 environment scrub removed from acp-bash's own environment)",
                changes.scrubbed.join(", ")
            ));
        }
        let base = self.base();
        let mut shell = self.shell.lock().unwrap();
        let mut next = shell.clone();
        for (name, value) in changes.vars {
            if value.as_ref() == base.get(&name) {
                next.vars.remove(&name);
            } else {
                next.vars.insert(name, value);
            }
        }
        if oldpwd_after != oldpwd_before {
            next.previous_dir = oldpwd_after
                .map(PathBuf::from)
                .filter(|dir| dir.is_absolute());
        }
        if let Some(why) = shell_state::over_bound(&next) {
            next.vars = shell.vars.clone();
            notices.push(format!("{why}: {keep}"));
        }
        *shell = next;
        notices
    }
}

/// Plans the sandbox of `inner`'s mode as a command of it would (without its limits, which are
/// per command) on a thread of its own, then has the session's zygote started from that plan
/// on the spawner thread. Nothing if the session is gone by then or its mode has no zygote.
fn start_sandbox_early(inner: &Arc<SessionInner>) {
    let session = Arc::downgrade(inner);
    let started = std::thread::Builder::new()
        .name("acp-bash-sandbox-early".into())
        .spawn(move || {
            let Some(inner) = session.upgrade() else {
                return;
            };
            let mode = *inner.mode.lock().unwrap();
            if mode != sandbox::Mode::Workspace && mode != sandbox::Mode::ReadOnly {
                return;
            }
            let roots = inner.roots(mode);
            let launch = sandbox::Launch {
                program: inner.engine.inner.bash.clone(),
                args: Vec::new(),
            };
            let limits = sandbox::Limits::default()
                .max_processes(None)
                .max_memory(None);
            let confined = sandbox::confine(launch, mode, &roots, limits);
            sandbox::start_zygote_early(confined, &inner.sandbox);
        });
    if let Err(error) = started {
        tracing::debug!(%error, "no thread to build the session's sandbox early; its first command will");
    }
}

/// Whether a run may change `name` in the session's state.
fn is_changeable(name: &str, owned: &Owned<'_>) -> bool {
    shell_state::is_identifier(name.as_bytes()) && !owned.contains(name)
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
    // Held before the folder exists: no other agent takes it for an abandoned one.
    super::leftovers::hold_lock(root);
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

    /// The shell state the next command starts with besides its directory: the exported
    /// variables the session's commands changed (and `unset`), and the previous directory for
    /// `cd -`. The same in every sandbox mode. See [`ShellState`].
    pub fn shell_state(&self) -> ShellState {
        self.inner.shell.lock().unwrap().clone()
    }

    /// Sets the shell state the next command starts with (a restored session's). What no
    /// command could have made is left out: names the engine owns or that are not shell
    /// identifiers, values of variables the scrub removed from the engine's environment, and,
    /// when they are over the bounds, all the variables. Returns what was left out and why
    /// (names only), for the user.
    pub fn restore_shell_state(&self, state: ShellState) -> Vec<String> {
        let inner = &self.inner;
        let owned = inner.owned(None);
        let scrubbed_values = inner.scrubbed_values();
        let mut notes = Vec::new();
        let mut kept = ShellState {
            previous_dir: state.previous_dir.filter(|dir| dir.is_absolute()),
            ..ShellState::default()
        };
        let mut left_out = Vec::new();
        for (name, value) in state.vars {
            let scrubbed = value
                .as_ref()
                .is_some_and(|value| scrubbed_values.contains(&value.as_os_str()));
            if is_changeable(&name, &owned) && !scrubbed {
                kept.vars.insert(name, value);
            } else {
                left_out.push(name);
            }
        }
        if !left_out.is_empty() {
            notes.push(format!(
                "Not restored: {} (names acp-bash sets itself, or the value of a variable its \
                 environment scrub removes).",
                left_out.join(", ")
            ));
        }
        if let Some(why) = shell_state::over_bound(&kept) {
            kept.vars.clear();
            notes.push(format!(
                "The session's exported variables were not restored: {why}."
            ));
        }
        *inner.shell.lock().unwrap() = kept;
        notes
    }

    /// The hosts the user allowed for this session's workspace commands beyond the network
    /// allowlist's rules (`None`: no allowlist here, the network is whole or absent).
    pub fn network_grants(&self) -> Option<crate::netproxy::Grants> {
        let network = self.inner.sandbox.network.as_ref()?;
        Some(network.grants().clone())
    }

    /// Whether `host`, refused to one of this session's commands, was refused only because
    /// the allowlist does not list it (not denied, not a private address): what the user may
    /// be asked to allow.
    pub fn host_askable(&self, host: &str) -> bool {
        self.inner
            .sandbox
            .network
            .as_ref()
            .is_some_and(|network| network.rules().only_unlisted(host))
    }

    /// The sandbox mode of the session's next commands.
    pub fn mode(&self) -> sandbox::Mode {
        *self.inner.mode.lock().unwrap()
    }

    /// Sets the sandbox mode for the session's next commands (and, after
    /// [`Session::prepare_sandbox`], starts building that mode's sandbox in the background).
    pub fn set_mode(&self, mode: sandbox::Mode) {
        let previous = std::mem::replace(&mut *self.inner.mode.lock().unwrap(), mode);
        if previous != mode
            && self
                .inner
                .sandbox_early
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            start_sandbox_early(&self.inner);
        }
    }

    /// Builds the sandbox of the session's mode now, in the background, where a per-session
    /// zygote serves it (workspace and read-only: the namespaces and the view,
    /// `notes/2026-12-02-zygote-first-command.md`), so that the session's first command does
    /// not wait for it; from then on, each mode [`Session::set_mode`] changes to too. An agent
    /// calls it once it has answered `session/new` (or restored a session). Without it, the
    /// first command of each mode builds it. The first command still plans its sandbox and
    /// uses the one built here only if it is the same.
    pub fn prepare_sandbox(&self) {
        self.inner
            .sandbox_early
            .store(true, std::sync::atomic::Ordering::Relaxed);
        start_sandbox_early(&self.inner);
        // The change tracker's watches and baseline, before the first command too.
        if self.inner.engine.inner.config.track_changes {
            let session = self.clone();
            std::thread::spawn(move || drop(session.changes()));
        }
    }

    /// The pids of the session's sandbox zygotes now running (at most one per mode it ran
    /// workspace or read-only commands in; empty where each command builds its own
    /// namespaces): for diagnostics and tests.
    pub fn zygote_pids(&self) -> Vec<i32> {
        self.inner.sandbox.zygote_pids()
    }

    /// The tracker of what the session's commands change in its folder, when the engine tracks
    /// changes ([`super::EngineConfig::track_changes`]) and the session's mode is workspace;
    /// started on first use (blocking: it watches every folder and reads the baseline), `None`
    /// where it cannot start (said once in the log).
    pub fn changes(&self) -> Option<Arc<crate::changes::ChangeTracker>> {
        let inner = &self.inner;
        if !inner.engine.inner.config.track_changes || self.mode() != sandbox::Mode::Workspace {
            return None;
        }
        inner
            .changes
            .get_or_init(|| match crate::changes::ChangeTracker::start(&inner.root) {
                Ok(tracker) => Some(Arc::new(tracker)),
                Err(error) => {
                    tracing::warn!(%error, "what commands change is not tracked");
                    None
                }
            })
            .clone()
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
