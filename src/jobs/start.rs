//! The one place a job's run is started: the seam between the job registry and the engine's run
//! API ([`Session::start`] → [`RunHandle`]). Everything else in [`super`] sees a [`StartedRun`].
//!
//! Owns: the request a job runs with (its own directory, so its `cd` does not move the session;
//! no timeout unless one is set) and waiting for the shell's pid. Must not touch: job bookkeeping.

use std::time::Duration;

use crate::exec::{RunHandle, RunRequest, Session};

/// A run in progress.
pub(super) struct StartedRun {
    /// The shell's pid; `None` if it never started (the outcome says why).
    pub pid: Option<u32>,
    /// Output, cancel, wait; dropping it kills the run's process group.
    pub handle: RunHandle,
}

/// Starts `command` on `session` in the session's current directory and mode, and returns once
/// its shell has started (or failed to). Must be called inside a tokio runtime.
pub(super) async fn start_run(session: &Session, command: String, timeout: Duration) -> StartedRun {
    let request = RunRequest::new(command).timeout(timeout).cwd(session.cwd());
    let handle = session.start(request);
    let pid = handle.pid().await;
    StartedRun { pid, handle }
}
