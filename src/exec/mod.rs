//! The execution engine: runs one bash script per call, provider-neutral (no ACP types here).
//!
//! Owns: spawning `bash -c` in its own process group with a parent-death signal, the environment
//! scrub ([`env`](mod@env)), the per-session working directory ([`Session`]), streaming output in chunks
//! that never split a UTF-8 character or an escape sequence ([`chunk`]), bounded head + tail
//! retention with a full log on disk ([`capture`]), timeouts and cancellation that kill the whole
//! process group. Must not touch: presentation, markers text, ACP.
//!
//! Files: this one (the [`Engine`]), `config` ([`EngineConfig`]), `request` ([`RunRequest`],
//! [`RunOutcome`]), `session` ([`Session`]), `run` (one run from start to outcome), `handle`
//! ([`RunHandle`]), `process` (spawning and the process group), `prelude` (what bash runs first
//! and its report), `shell_state` (the exported variables that carry over, [`ShellState`]).

pub mod capture;
pub mod chunk;
mod config;
pub mod drain;
pub mod env;
mod handle;
mod leftovers;
pub mod logdir;
mod prelude;
mod process;
mod request;
mod run;
mod server;
mod session;
pub mod shell_state;
pub mod stateless;
pub mod status;

pub use config::EngineConfig;
pub use handle::RunHandle;
pub use leftovers::{leave, remove_abandoned};
pub use request::{RunOutcome, RunRequest};
pub use server::{ServerProcess, StartedServer};
pub use session::{Session, SessionError};
pub use shell_state::ShellState;
pub use status::{signal_name, signal_number, Exit, RunStatus, Truncation};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::sandbox;
use session::SessionInner;
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
    /// The shell prelude (a sealed memfd on Linux), made on first use.
    prelude: OnceLock<Result<prelude::Prelude, String>>,
    /// `config.protection` with the home and the log dir filled in.
    protection: sandbox::Protection,
    /// The variables of [`EngineInner::env`] a command could change (what a session's state
    /// is told apart from), made once: it depends on the engine alone.
    base: OnceLock<std::collections::BTreeMap<String, std::ffi::OsString>>,
    /// The sessions that keep their sandbox helpers ([`EngineConfig::max_warm_sessions`]).
    warm: crate::sandbox::warm::WarmSessions,
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
        crate::sandbox::set_workspace_network_allowlist(config.network_proxy.is_some());
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
        let warm =
            crate::sandbox::warm::WarmSessions::new(config.max_warm_sessions, config.warm_idle);
        let inner = Arc::new(EngineInner {
            config,
            env: OnceLock::new(),
            env_source: vars,
            bash,
            prelude: OnceLock::new(),
            protection,
            base: OnceLock::new(),
            warm,
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
                shell: Mutex::new(shell_state::ShellState::default()),
                mode: Mutex::new(self.inner.config.sandbox_mode),
                announced_mode: Mutex::new(None),
                temp: OnceLock::new(),
                git_repos: OnceLock::new(),
                sandbox: Arc::new(
                    crate::sandbox::SessionSandbox::new(
                        self.inner.config.zygote_program.clone(),
                        Some(self.inner.warm.handle()),
                    )
                    .with_network(
                        self.inner.config.network_proxy.clone().and_then(|proxy| {
                            let runtime = tokio::runtime::Handle::try_current().ok()?;
                            Some(crate::netproxy::SessionNetwork::new(proxy, runtime))
                        }),
                    ),
                ),
                sandbox_early: std::sync::atomic::AtomicBool::new(false),
                changes: OnceLock::new(),
            }),
        })
    }

    /// The shell prelude, made on first use.
    fn prelude(&self) -> Result<&prelude::Prelude, String> {
        self.inner
            .prelude
            .get_or_init(|| {
                prelude::Prelude::new().map_err(|error| {
                    format!("acp-bash could not prepare the shell prelude (a sealed file): {error}")
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}
