//! A running command, owned: its live output, cancel, wait, and kill on drop.
//!
//! Owns [`RunHandle`] and the control block the run's task and the handle share. Must not touch:
//! how the run proceeds (that is `run`), how processes start (`process`).

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::drain::OutputEvent;
use super::process::signal_group;
use super::{Exit, RunOutcome, RunStatus};

/// What the handle and the run's task share.
#[derive(Debug, Default)]
pub(super) struct Control {
    /// Cancelled by [`RunHandle::cancel`] (SIGTERM, then SIGKILL after the grace) and by drop.
    pub cancel: CancellationToken,
    /// Set when the handle was dropped before the run ended: kill at once, no grace.
    pub dropped: AtomicBool,
    /// The process group while it may have members: set once the shell started, cleared after
    /// the run's last kill. Signals to it are sent under this lock, so never to a reused id.
    pub pgid: Mutex<Option<i32>>,
    /// The shell's pid, set once it has started (for [`RunHandle::pid`]); `started` wakes
    /// whoever waits for it.
    pub pid: std::sync::OnceLock<u32>,
    pub started: tokio::sync::Notify,
    /// Set when the run's task has ended (started or not); `started` wakes waiters then too.
    pub ended: AtomicBool,
}

/// Held by the run's task: when it ends (the shell never started, or the run is over),
/// [`RunHandle::pid`]'s waiters wake and see it.
pub(super) struct Ended(pub Arc<Control>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.ended.store(true, Ordering::SeqCst);
        self.0.started.notify_waiters();
    }
}

impl Control {
    /// SIGKILLs the process group, if it still may have members.
    pub fn kill_group(&self) {
        if let Some(pgid) = *self.pgid.lock().unwrap() {
            signal_group(pgid, libc::SIGKILL);
        }
    }
}

/// A command started by [`super::Session::start`].
///
/// - Its output is a [`futures::Stream`] of chunks ([`RunHandle::next_output`] reads one): valid
///   UTF-8, never cut inside a character or an escape sequence. The stream ends when the command
///   and everything holding its output have gone. Output is also kept for the outcome.
/// - The stream has back-pressure, like a pipe: about a megabyte waits for the reader, then the
///   command blocks on its output until the stream is read (its timeout still runs). A holder
///   that does not want the live output calls [`RunHandle::discard_output`]; [`RunHandle::wait`]
///   does that itself.
/// - [`RunHandle::cancel`] asks the command to stop (SIGTERM to its process group, SIGKILL after
///   the engine's grace); [`RunHandle::wait`] returns the [`RunOutcome`].
/// - Dropping the handle before the run ended SIGKILLs the whole process group at once (like
///   tokio's `kill_on_drop`), and so does dropping any future that owns the handle (a `select!`
///   branch that lost, a `timeout`, an aborted task). The run is still reaped in the background.
///
/// The handle is `Send + 'static`: it can move to another task and outlive the code that
/// started it.
#[derive(Debug)]
#[non_exhaustive]
pub struct RunHandle {
    cwd: PathBuf,
    output: mpsc::Receiver<OutputEvent>,
    control: Arc<Control>,
    task: Option<JoinHandle<RunOutcome>>,
}

impl RunHandle {
    pub(super) fn new(
        cwd: PathBuf,
        output: mpsc::Receiver<OutputEvent>,
        control: Arc<Control>,
        task: JoinHandle<RunOutcome>,
    ) -> Self {
        RunHandle {
            cwd,
            output,
            control,
            task: Some(task),
        }
    }

    /// The directory the command runs in (known at start, before any output).
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The pid of the shell (the process group that [`RunHandle::cancel`] signals), as this
    /// process sees it: waits until the shell has started; `None` if it never did.
    pub async fn pid(&self) -> Option<u32> {
        loop {
            let started = self.control.started.notified();
            tokio::pin!(started);
            started.as_mut().enable();
            if let Some(pid) = self.control.pid.get() {
                return Some(*pid);
            }
            if self.control.ended.load(Ordering::SeqCst) || self.is_finished() {
                return None;
            }
            // Woken when the shell starts, and when the run's task ends without starting it
            // (`Ended`): no timer.
            started.await;
        }
    }

    /// The next chunk of output, or `None` once the output has ended. acp-bash's own notices
    /// come in their place among the output, as [`super::drain::notice_line`]s.
    pub async fn next_output(&mut self) -> Option<String> {
        self.output.recv().await.map(OutputEvent::into_text)
    }

    /// The next piece of live output, with acp-bash's own notices apart from the command's
    /// output ([`OutputEvent::Notice`]), or `None` once the output has ended.
    pub async fn next_event(&mut self) -> Option<OutputEvent> {
        self.output.recv().await
    }

    /// The live output as [`OutputEvent`]s, notices apart (for [`super::drain::drain`] or any
    /// reader that shows notices elsewhere); the handle itself is the stream of chunks with the
    /// notices among them.
    pub fn events(&mut self) -> impl futures::Stream<Item = OutputEvent> + Unpin + '_ {
        futures::stream::poll_fn(move |cx| self.output.poll_recv(cx))
    }

    /// Reads the output until it ends, feeding `reader` ([`super::drain`], the one drain loop);
    /// the first time `cancel` fires the run is cancelled ([`RunHandle::cancel`]) and reading
    /// goes on until the output ends. Then [`RunHandle::wait`] has the outcome.
    pub async fn drain(
        &mut self,
        reader: &mut (dyn super::drain::DrainReader + Send),
        cancel: &CancellationToken,
    ) {
        let control = self.control.cancel.clone();
        super::drain::drain(&mut self.events(), reader, cancel, move || control.cancel()).await;
    }

    /// Stops the live stream: the command's output is no longer held for a reader (it is still
    /// kept for the outcome), so the command never waits for one.
    pub fn discard_output(&mut self) {
        self.output.close();
        while self.output.try_recv().is_ok() {}
    }

    /// Asks the command to stop: SIGTERM to its process group, SIGKILL after the engine's
    /// `kill_grace`. The outcome then says `cancelled`. Does nothing once the run has ended.
    pub fn cancel(&self) {
        self.control.cancel.cancel();
    }

    /// A token that cancels this run like [`RunHandle::cancel`] when cancelled.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.control.cancel.clone()
    }

    /// Whether the run has ended (its outcome is ready for [`RunHandle::wait`]).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Waits for the run to end and returns what it produced. Output not read from the stream
    /// by then is still in the outcome.
    pub async fn wait(mut self) -> RunOutcome {
        // Nobody reads the stream any more: the run stops sending to it.
        self.discard_output();
        let task = self.task.as_mut().expect("the task is taken only here");
        let joined = task.await;
        self.task = None;
        match joined {
            Ok(outcome) => outcome,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(error) => lost(&self.cwd, &error.to_string()),
        }
    }
}

impl futures::Stream for RunHandle {
    type Item = String;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<String>> {
        self.output
            .poll_recv(cx)
            .map(|event| event.map(OutputEvent::into_text))
    }
}

impl Drop for RunHandle {
    fn drop(&mut self) {
        if self.is_finished() {
            return;
        }
        self.control.dropped.store(true, Ordering::SeqCst);
        self.control.kill_group();
        self.control.cancel.cancel();
    }
}

/// The outcome of a run whose task was stopped (its runtime shut down) before it could report.
fn lost(cwd: &Path, why: &str) -> RunOutcome {
    let notice = format!("the run's task stopped before the run ended ({why}); it was killed");
    RunOutcome {
        output: format!("[acp-bash: {notice}]\n"),
        status: RunStatus {
            exit: Exit::Signal(libc::SIGKILL),
            timed_out_after: None,
            cancelled: true,
            truncation: None,
        },
        cwd: cwd.to_path_buf(),
        next_cwd: cwd.to_path_buf(),
        next_shell_state: None,
        notices: vec![notice],
        duration: std::time::Duration::ZERO,
        blocked_hosts: Vec::new(),
    }
}
