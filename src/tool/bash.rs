//! One bash call: its arguments and running it to a result text.
//!
//! Owns [`BashCall`] (what the caller asked for, with its per-call overrides) and [`run_bash`],
//! which hands the command to the engine and renders the outcome with the status markers. Must
//! not touch: process handling (the engine's), presentation, ACP.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::markers::render_result;
use crate::exec::{RunHandle, RunOutcome, RunRequest, Session};
use crate::sandbox;

/// A bash tool call: the command, what it is for, and per-call overrides of the session's and
/// engine's settings. Every field is honoured (see [`BashCall::request`]).
///
/// Build it with [`BashCall::new`] and the builder methods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BashCall {
    /// The script, passed to bash unchanged. Also the call's title.
    pub command: String,
    /// What the command is for, in words, when the caller said so.
    pub description: Option<String>,
    /// Overrides the engine's default timeout.
    pub timeout: Option<Duration>,
    /// Runs in this directory instead of the session's cwd; a `cd` in the command is then not
    /// remembered by the session. Relative to the session's cwd.
    pub cwd: Option<PathBuf>,
    /// Runs in this sandbox mode instead of the session's.
    pub sandbox_mode: Option<sandbox::Mode>,
    /// Variables kept from the engine's source environment even though the scrub removed them.
    pub env_keep: Vec<String>,
    /// Variables set for this call.
    pub env_set: Vec<(String, String)>,
    /// Bytes of output kept in the result (half head, half tail) instead of the engine's.
    pub output_limit: Option<usize>,
}

impl BashCall {
    /// A call that runs `command` with the session's and engine's settings.
    pub fn new(command: impl Into<String>) -> Self {
        BashCall {
            command: command.into(),
            ..BashCall::default()
        }
    }

    /// Sets [`BashCall::description`].
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets [`BashCall::timeout`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets [`BashCall::cwd`] (not persisted).
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Sets [`BashCall::sandbox_mode`].
    pub fn sandbox_mode(mut self, mode: sandbox::Mode) -> Self {
        self.sandbox_mode = Some(mode);
        self
    }

    /// Adds a name to [`BashCall::env_keep`].
    pub fn keep_env(mut self, name: impl Into<String>) -> Self {
        self.env_keep.push(name.into());
        self
    }

    /// Adds a variable to [`BashCall::env_set`].
    pub fn set_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env_set.push((name.into(), value.into()));
        self
    }

    /// Sets [`BashCall::output_limit`].
    pub fn output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = Some(bytes);
        self
    }

    /// The engine request for this call: every field but the description.
    pub fn request(&self) -> RunRequest {
        let mut request = RunRequest::new(self.command.clone());
        request.timeout = self.timeout;
        request.cwd = self.cwd.clone();
        request.sandbox_mode = self.sandbox_mode;
        request.env_keep = self.env_keep.clone();
        request.env_set = self.env_set.clone();
        request.output_limit = self.output_limit;
        request
    }

    /// Starts the call on `session` (see [`Session::start`]).
    pub fn start(&self, session: &Session) -> RunHandle {
        session.start(self.request())
    }
}

/// What a bash call produced.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BashResult {
    /// The result text: the output, then the status line (`render_result(outcome.output,
    /// &outcome.status)`). This is what a console block shows.
    pub text: String,
    /// Everything the engine reported, for callers that want more than the text.
    pub outcome: RunOutcome,
}

impl BashResult {
    /// The result of a finished run.
    pub fn of(outcome: RunOutcome) -> Self {
        let text = render_result(&outcome.output, &outcome.status);
        BashResult { text, outcome }
    }
}

/// Runs `call` on `session`, streaming output chunks to `on_output` as they arrive; cancelling
/// `cancel` kills the run. Never fails: a run that could not start says why in its output.
pub async fn run_bash(
    session: &Session,
    call: &BashCall,
    on_output: &mut (dyn FnMut(&str) + Send),
    cancel: &CancellationToken,
) -> BashResult {
    BashResult::of(session.run(call.request(), on_output, cancel).await)
}
