//! What to run and what a run produced: [`RunRequest`] (the script and its per-run overrides)
//! and [`RunOutcome`]. Plain values. Must not touch: running.

use std::path::PathBuf;
use std::time::Duration;

use super::RunStatus;
use crate::sandbox;

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
    /// Bytes of output sent to the run's live stream ([`RunHandle`](super::RunHandle)) before it stops (the chunk
    /// that crosses the limit is still sent, so a reader can tell); all of it when `None`.
    pub live_limit: Option<usize>,
    /// Host folders this run may write too, in workspace and read-only mode, masks still over
    /// them ([`sandbox::Roots::also_writable`]: what an "allow once" answer to a refused write
    /// gives, instead of full mode).
    pub also_writable: Vec<PathBuf>,
    /// Hosts this run alone may also reach, in workspace mode through the allowlist's proxy
    /// ([`sandbox::Roots::also_hosts`]: what an "allow once" answer to a refused host gives:
    /// the run gets a network namespace and a proxy listener of its own that allow them; the
    /// session's other commands and background jobs do not).
    pub also_hosts: Vec<crate::netproxy::HostPattern>,
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

    /// Adds `host` to [`RunRequest::also_hosts`].
    pub fn also_host(mut self, host: crate::netproxy::HostPattern) -> Self {
        self.also_hosts.push(host);
        self
    }

    /// Adds `folder` to [`RunRequest::also_writable`].
    pub fn also_writable(mut self, folder: impl Into<PathBuf>) -> Self {
        self.also_writable.push(folder.into());
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
    /// The shell state (exported variables, previous directory) the next command of the
    /// session will start with, as this run left it; `None` when the run did not get as far as
    /// reporting it (it never started), which leaves it as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_shell_state: Option<super::ShellState>,
    /// Everything the engine said about the run that is not the command's output
    /// (a deleted cwd, a sandbox layer that is off): also written into `output`.
    pub notices: Vec<String>,
    /// How long the run took, start to reaped.
    pub duration: Duration,
    /// The hosts workspace mode's network allowlist refused to this run's connections, from
    /// the proxy's own record (never from the output), in the order first refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_hosts: Vec<String>,
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
