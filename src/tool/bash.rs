//! One bash call: its arguments and running it to a result text.
//!
//! Owns [`BashCall`] (what the caller asked for, with its per-call overrides) and [`run_bash`],
//! which hands the command to the engine and renders the outcome with the status markers. Must
//! not touch: process handling (the engine's), presentation, ACP.

use tokio_util::sync::CancellationToken;

use super::markers::render_result;
use crate::exec::{RunHandle, RunOutcome, RunRequest, Session};

/// A bash tool call: the engine request (the command and its per-call overrides of the
/// session's and engine's settings) plus what the call is for. Every override of the request is
/// honoured; the description is for the user (the card's header), not the engine.
///
/// Build it with [`BashCall::new`], or from a [`RunRequest`] built with its builder methods when
/// the call overrides a setting, then [`BashCall::description`]:
///
/// ```
/// use acp_bash::exec::RunRequest;
/// use acp_bash::tool::BashCall;
///
/// let call = BashCall::from(RunRequest::new("cargo test").cwd("crates/core")).description("Test");
/// assert_eq!(call.command(), "cargo test");
/// assert_eq!(call.request.cwd.as_deref(), Some(std::path::Path::new("crates/core")));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BashCall {
    /// What the engine runs: [`RunRequest::script`] is the command (also the call's title), the
    /// other fields are the per-call overrides.
    pub request: RunRequest,
    /// What the command is for, in words, when the caller said so.
    pub description: Option<String>,
    /// Show the call as a read, a search or a listing when its command is one
    /// ([`crate::classify`]): display only, what runs is the same. On for a model's calls
    /// ([`super::BashArgs::into_call`]); a user's typed commands keep the terminal.
    pub classify: bool,
}

impl BashCall {
    /// A call that runs `command` with the session's and engine's settings.
    pub fn new(command: impl Into<String>) -> Self {
        BashCall::from(RunRequest::new(command))
    }

    /// Sets [`BashCall::description`].
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets [`BashCall::classify`].
    pub fn classified(mut self, classify: bool) -> Self {
        self.classify = classify;
        self
    }

    /// The command: the script passed to bash unchanged.
    pub fn command(&self) -> &str {
        &self.request.script
    }

    /// The engine request for this call: the command and every override.
    pub fn request(&self) -> &RunRequest {
        &self.request
    }

    /// Starts the call on `session` (see [`Session::start`]).
    pub fn start(&self, session: &Session) -> RunHandle {
        session.start(self.request.clone())
    }
}

impl From<RunRequest> for BashCall {
    /// A call that runs `request`, without a description.
    fn from(request: RunRequest) -> Self {
        BashCall {
            request,
            description: None,
            classify: false,
        }
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
    /// What the command changed in the session folder, in one line for the model
    /// (`[changed: src/a.rs +3 −1, b.txt new]`), when changes are tracked and it changed any.
    pub changed: Option<String>,
    /// What the command changed, as its edit call shows it (kept in the session's history for
    /// the replay).
    pub changes: Option<crate::present::changes::ChangeView>,
}

impl BashResult {
    /// The result of a finished run.
    pub fn of(outcome: RunOutcome) -> Self {
        let text = render_result(&outcome.output, &outcome.status);
        BashResult {
            text,
            outcome,
            changed: None,
            changes: None,
        }
    }

    /// Adds the agent's `note` to the result (a line `[acp-bash: note]` after the output, and
    /// a notice): what the model reads after a permission question, say.
    pub fn add_note(&mut self, note: &str) {
        let output = &mut self.outcome.output;
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&format!("[acp-bash: {note}]\n"));
        self.outcome.notices.push(note.to_string());
        self.text = render_result(&self.outcome.output, &self.outcome.status);
    }

    /// The result of a call that could not run at all (its task failed): `message` as its
    /// output, exit code 1, in `cwd`.
    pub fn failed(message: String, cwd: std::path::PathBuf) -> Self {
        BashResult::of(RunOutcome {
            output: message,
            status: crate::exec::status::RunStatus::exited(1),
            next_cwd: cwd.clone(),
            next_shell_state: None,
            cwd,
            notices: Vec::new(),
            duration: std::time::Duration::ZERO,
            blocked_hosts: Vec::new(),
        })
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
    BashResult::of(session.run(call.request.clone(), on_output, cancel).await)
}
