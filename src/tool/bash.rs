//! One bash call: its arguments and running it to a result text.
//!
//! Owns [`BashCall`] (what the caller asked for, plus where it will run) and [`run_bash`], which
//! hands the command to the engine and renders the outcome with the status markers. Must not
//! touch: process handling (the engine's), presentation, ACP.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::markers::render_result;
use crate::exec::{RunOutcome, RunRequest, Session};

/// The bash tool's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashCall {
    /// The script, passed to bash unchanged. Also the call's title.
    pub command: String,
    /// What the command is for, in words, when the caller said so.
    pub description: Option<String>,
    /// Where the command will start: the session's current directory when the call is made.
    /// Known before the run, so a UI can show it on the card while the command runs.
    pub cwd: PathBuf,
    /// Overrides the engine's default timeout.
    pub timeout: Option<Duration>,
}

/// What a bash call produced.
#[derive(Debug, Clone)]
pub struct BashResult {
    /// The result text: the output, then the status line (`render_result(outcome.output,
    /// &outcome.status)`). This is what a model or a console block sees.
    pub text: String,
    /// Everything the engine reported, for callers that want more than the text.
    pub outcome: RunOutcome,
}

/// Runs `call` on `session`, streaming output chunks to `on_output` as they arrive; cancelling
/// `cancel` kills the run. Never fails: a run that could not start says why in its output.
pub async fn run_bash(
    session: &Session,
    call: &BashCall,
    on_output: &mut (dyn FnMut(&str) + Send),
    cancel: &CancellationToken,
) -> BashResult {
    let request = RunRequest {
        script: call.command.clone(),
        timeout: call.timeout,
    };
    let outcome = session.run(request, on_output, cancel).await;
    let text = render_result(&outcome.output, &outcome.status);
    BashResult { text, outcome }
}
