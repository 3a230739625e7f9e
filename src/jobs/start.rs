//! The one place a job's run is started: the seam between the job registry and the engine's run
//! API. Everything else in [`super`] sees only a [`StartedRun`]: the shell's pid, a stream of
//! output chunks, a cancel token and the run's outcome.
//!
//! Owns: turning `Session::run_observed` (callbacks and a cancellation token) into that shape on
//! a tracked tokio task. Must not touch: job bookkeeping.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::exec::{RunOutcome, RunRequest, Session};

/// A run in progress.
pub(super) struct StartedRun {
    /// The shell's pid, once it has started (dropped without a value if it never did).
    pub pid: oneshot::Receiver<u32>,
    /// Output chunks as they arrive; closed when the run has ended.
    pub output: mpsc::UnboundedReceiver<String>,
    /// Cancelling it kills the run's whole process tree.
    pub cancel: CancellationToken,
    /// The run's outcome, once it has ended and been reaped.
    pub join: JoinHandle<RunOutcome>,
}

/// Starts `request` on `session` in a task of `tasks` (which must be inside a tokio runtime,
/// on a long-lived worker thread: the shell's parent-death signal is tied to that thread).
pub(super) fn start_run(
    session: Arc<Session>,
    request: RunRequest,
    tasks: &TaskTracker,
) -> StartedRun {
    let (pid_tx, pid) = oneshot::channel();
    let (output_tx, output) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    let join = tasks.spawn(async move {
        let mut pid_tx = Some(pid_tx);
        let mut on_start = move |pid: u32| {
            if let Some(tx) = pid_tx.take() {
                let _ = tx.send(pid);
            }
        };
        let mut on_output = move |chunk: &str| {
            let _ = output_tx.send(chunk.to_string());
        };
        session
            .run_observed(request, &mut on_start, &mut on_output, &token)
            .await
    });
    StartedRun {
        pid,
        output,
        cancel,
        join,
    }
}
