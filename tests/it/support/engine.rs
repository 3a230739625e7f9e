//! Shared helper for the tests that drive the engine through `Session::run`.

use std::time::Duration;

use acp_bash::exec::{RunOutcome, RunRequest, Session};
use tokio_util::sync::CancellationToken;

/// How long any run may take before the test calls it a hang.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// Runs `script` to the end (output streamed nowhere).
pub async fn run(session: &Session, script: &str) -> RunOutcome {
    run_with(session, script, None, &CancellationToken::new()).await
}

/// Runs `script` with a timeout of its own and a cancel token; panics if it hangs.
pub async fn run_with(
    session: &Session,
    script: &str,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
) -> RunOutcome {
    let request = RunRequest {
        script: script.into(),
        timeout,
    };
    tokio::time::timeout(HANG_GUARD, session.run(request, &mut |_: &str| {}, cancel))
        .await
        .expect("the run hung")
}
