//! One run, start to end: pick the directory, start the shell, stream and keep its output, enforce
//! the timeout and cancellation, reap it, clean up its process group, record where `cd` went.
//!
//! Owns: the run's lifecycle and its deadlines. Must not touch: how bytes are chunked or kept
//! (`chunk`, `capture`), how the process is started (`process`), what the markers look like.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::Instant;

use tokio::io::AsyncReadExt;
use tokio::time::Instant as Deadline;
use tokio_util::sync::CancellationToken;

use super::capture::Capture;
use super::chunk::Chunker;
use super::process::{self, signal_group, Started};
use super::{prelude, Exit, RunOutcome, RunRequest, RunStatus, Session};
use crate::sandbox::{self, Launch, Roots};

/// Read size for the output pipe.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// After the first SIGTERM, when to send a second one. A TERM that lands while bash is forking
/// a command is swallowed by the child before it execs (bash has a TERM handler while an EXIT
/// trap is set), leaving bash waiting on a command that never got the signal; the second TERM
/// reaches that command, after which bash acts on its own pending TERM.
const SECOND_TERM_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// Everything that happens to output: streamed to the caller in safe chunks, and kept.
struct Output<'a> {
    chunker: Chunker,
    capture: Capture,
    on_output: &'a mut (dyn FnMut(&str) + Send),
    notices: Vec<String>,
}

impl Output<'_> {
    fn push(&mut self, bytes: &[u8]) {
        self.capture.push(bytes);
        let text = self.chunker.push_borrowed(bytes);
        if !text.is_empty() {
            (self.on_output)(&text);
        }
    }

    /// Something the engine tells the user about the run, shown in its output.
    fn notice(&mut self, text: String) {
        self.push(format!("[acp-bash: {text}]\n").as_bytes());
        self.notices.push(text);
    }

    fn flush(&mut self) {
        let text = self.chunker.finish();
        if !text.is_empty() {
            (self.on_output)(&text);
        }
    }
}

pub(super) async fn run(
    session: &Session,
    request: RunRequest,
    on_start: &mut (dyn FnMut(u32) + Send),
    on_output: &mut (dyn FnMut(&str) + Send),
    cancel: &CancellationToken,
) -> RunOutcome {
    let started_at = Instant::now();
    let engine = &session.engine.inner;
    let config = &engine.config;
    let mut output = Output {
        chunker: Chunker::default(),
        capture: Capture::new(
            config.keep_head_bytes,
            config.keep_tail_bytes,
            &config.log_dir,
        ),
        on_output,
        notices: Vec::new(),
    };

    let previous = session.cwd();
    let cwd = if previous.is_dir() {
        previous
    } else if session.root.is_dir() {
        output.notice(format!(
            "the working directory {} no longer exists; running in the session root {} instead",
            previous.display(),
            session.root.display()
        ));
        session.root.clone()
    } else {
        let message = format!(
            "the session root {} no longer exists; start a new session in an existing directory",
            session.root.display()
        );
        output.notice(message);
        return not_started(output, previous, started_at, 126);
    };

    let private_dir = match session.engine.private_dir() {
        Ok(dir) => dir,
        Err(message) => {
            output.notice(message);
            return not_started(output, cwd, started_at, 126);
        }
    };
    let run_number = engine
        .runs
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cwd_file = private_dir.path.join(format!("cwd-{run_number}"));

    let launch = Launch {
        program: engine.bash.clone(),
        args: vec!["-c".into(), request.script.into()],
    };
    let roots = Roots {
        workspace: session.root.clone(),
        temp: std::env::temp_dir(),
    };
    let mode = session.mode();
    let confined = sandbox::confine(launch, mode, &roots);
    let first_run_in_mode = session.announced_mode.lock().unwrap().replace(mode) != Some(mode);
    if first_run_in_mode {
        for notice in confined.notices {
            output.notice(notice);
        }
    }
    let env = engine.env().vars.iter().cloned().chain([
        (
            "BASH_ENV".into(),
            private_dir.prelude.clone().into_os_string(),
        ),
        (
            prelude::CWD_FILE_VAR.into(),
            cwd_file.clone().into_os_string(),
        ),
    ]);
    let started = match process::start(&confined.launch, confined.pre_exec, env, &cwd) {
        Ok(started) => started,
        Err(error) => {
            let code = if error.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            output.notice(format!(
                "could not start {}: {error}",
                engine.bash.display()
            ));
            return not_started(output, cwd, started_at, code);
        }
    };
    on_start(started.pgid as u32);

    let timeout = request.timeout.unwrap_or(config.default_timeout);
    let ended = supervise(started, &mut output, cancel, timeout, config).await;

    let captured = output.capture.finish();
    let mut text = captured.text;
    let mut notices = output.notices;
    if let Some(error) = captured.log_error {
        text.push_str(&format!("[acp-bash: {error}]\n"));
        notices.push(error);
    }
    let next_cwd = prelude::take_recorded_cwd(&cwd_file).unwrap_or_else(|| cwd.clone());
    *session.cwd.lock().unwrap() = next_cwd.clone();
    RunOutcome {
        output: text,
        status: RunStatus {
            exit: ended.exit,
            timed_out_after: ended.timed_out.then_some(timeout),
            cancelled: ended.cancelled,
            truncation: captured.truncation,
        },
        cwd,
        next_cwd,
        notices,
        duration: started_at.elapsed(),
    }
}

/// How the supervised process ended.
struct Ended {
    exit: Exit,
    timed_out: bool,
    cancelled: bool,
}

/// Reads output until the shell has exited and the pipe is closed (or the grace for
/// grandchildren holding it has passed), enforcing the timeout and cancellation, then kills
/// whatever is left of the process group.
async fn supervise(
    started: Started,
    output: &mut Output<'_>,
    cancel: &CancellationToken,
    timeout: std::time::Duration,
    config: &super::EngineConfig,
) -> Ended {
    let Started {
        mut child,
        pgid,
        output: mut pipe,
    } = started;
    let mut buffer = vec![0u8; READ_BUFFER_BYTES];
    let timeout_at = Deadline::now() + timeout;
    let mut exit_status: Option<std::io::Result<std::process::ExitStatus>> = None;
    let mut reading = true;
    let mut timed_out = false;
    let mut cancelled = false;
    // When set: SIGTERM was sent; a second SIGTERM and then SIGKILL follow at these instants.
    let mut term_again_at: Option<Deadline> = None;
    let mut kill_at: Option<Deadline> = None;
    let terminate = |term_again_at: &mut Option<Deadline>, kill_at: &mut Option<Deadline>| {
        signal_group(pgid, libc::SIGTERM);
        let now = Deadline::now();
        *term_again_at = Some(now + SECOND_TERM_AFTER.min(config.kill_grace / 2));
        *kill_at = Some(now + config.kill_grace);
    };
    // When set: the shell has exited and we stop waiting for the pipe at this instant.
    let mut give_up_pipe_at: Option<Deadline> = None;

    while reading || exit_status.is_none() {
        tokio::select! {
            read = pipe.read(&mut buffer), if reading => match read {
                Ok(0) | Err(_) => reading = false,
                Ok(n) => output.push(&buffer[..n]),
            },
            status = child.wait(), if exit_status.is_none() => {
                exit_status = Some(status);
                term_again_at = None;
                kill_at = None;
                give_up_pipe_at = Some(Deadline::now() + config.pipe_grace);
            },
            () = cancel.cancelled(), if !cancelled && !timed_out => {
                cancelled = true;
                if exit_status.is_some() {
                    reading = false;
                } else {
                    terminate(&mut term_again_at, &mut kill_at);
                }
            },
            () = tokio::time::sleep_until(timeout_at), if !timed_out && !cancelled && exit_status.is_none() => {
                timed_out = true;
                terminate(&mut term_again_at, &mut kill_at);
            },
            () = sleep_until(term_again_at) => {
                signal_group(pgid, libc::SIGTERM);
                term_again_at = None;
            },
            () = sleep_until(kill_at) => {
                signal_group(pgid, libc::SIGKILL);
                kill_at = None;
            },
            () = sleep_until(give_up_pipe_at), if reading => reading = false,
        }
    }
    // Whatever the command left running in its group goes with the run.
    signal_group(pgid, libc::SIGKILL);
    output.flush();
    let exit = match exit_status {
        Some(Ok(status)) => match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::Code(-1),
        },
        Some(Err(error)) => {
            output.notice(format!("could not learn how the shell ended: {error}"));
            Exit::Code(-1)
        }
        None => unreachable!("the loop ends only after the shell exited"),
    };
    Ended {
        exit,
        timed_out,
        cancelled,
    }
}

/// Sleeps until `deadline`, or forever when there is none.
async fn sleep_until(deadline: Option<Deadline>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The outcome of a run whose shell never started (the output says why).
fn not_started(mut output: Output<'_>, cwd: PathBuf, started_at: Instant, code: i32) -> RunOutcome {
    output.flush();
    let captured = output.capture.finish();
    RunOutcome {
        output: captured.text,
        status: RunStatus::exited(code),
        next_cwd: cwd.clone(),
        cwd,
        notices: output.notices,
        duration: started_at.elapsed(),
    }
}
