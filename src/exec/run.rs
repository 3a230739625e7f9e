//! One run, start to end: pick the directory, start the shell, stream and keep its output, enforce
//! the timeout and cancellation, reap it, clean up its process group, record where `cd` went.
//!
//! Owns: the run's lifecycle and its deadlines. Must not touch: how bytes are chunked or kept
//! (`chunk`, `capture`), how the process is started (`process`), what the markers look like.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio::time::Instant as Deadline;

use super::capture::{Capture, LogLimits};
use super::chunk::Chunker;
use super::drain::{notice_line, OutputEvent};
use super::handle::{Control, RunHandle};
use super::process::{self, signal_group, Started};
use super::{prelude, Exit, RunOutcome, RunRequest, RunStatus, Session};
use crate::sandbox::{self, Launch};

/// Read size for the output pipe.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// After the first SIGTERM, when to send a second one. A TERM that lands while bash is forking
/// a command is swallowed by the child before it execs (bash has a TERM handler while an EXIT
/// trap is set), leaving bash waiting on a command that never got the signal; the second TERM
/// reaches that command, after which bash acts on its own pending TERM.
const SECOND_TERM_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

/// Chunks the handle's stream holds before the run waits for its reader.
const LIVE_CHANNEL_CHUNKS: usize = 4;

/// Bytes of output waiting for room in the stream before the run stops reading the pipe (the
/// command then blocks on its output, as with a pipe nobody reads).
const MAX_PENDING_BYTES: usize = 256 * 1024;

/// Everything that happens to output: streamed to the handle in safe chunks, and kept.
struct Output {
    chunker: Chunker,
    capture: Capture,
    /// The handle's stream, until it is closed or the live limit is passed.
    live: Option<mpsc::Sender<OutputEvent>>,
    /// What waits for room in the stream, in order: output (safe chunks joined, which is a safe
    /// chunk) and notices.
    pending: VecDeque<OutputEvent>,
    /// The bytes of `pending`.
    pending_bytes: usize,
    live_sent: usize,
    live_limit: usize,
    notices: Vec<String>,
}

impl Output {
    fn push(&mut self, bytes: &[u8]) {
        self.capture.push(bytes);
        let text = self.chunker.push_borrowed(bytes);
        if !text.is_empty() {
            self.queue(&text);
        }
    }

    /// Queues a chunk for the live stream while the limit allows (the chunk that crosses it
    /// still goes, so that a reader that caps its own stream sees the crossing). Past the limit
    /// nothing more is queued, but what is already queued is still delivered: dropping it would
    /// lose the crossing chunk when the reader is behind, and the reader would never see its cap.
    fn queue(&mut self, text: &str) {
        if self.live_sent > self.live_limit {
            return;
        }
        if self.live.is_some() {
            self.live_sent += text.len();
            self.pending_bytes += text.len();
            match self.pending.back_mut() {
                Some(OutputEvent::Output(waiting)) => waiting.push_str(text),
                _ => self
                    .pending
                    .push_back(OutputEvent::Output(text.to_string())),
            }
        }
    }

    /// Whether the pipe may be read: the stream is not too far behind.
    fn can_read(&self) -> bool {
        self.pending_bytes < MAX_PENDING_BYTES
    }

    /// Something the engine tells the user about the run: kept in its output as a line of its
    /// own ([`notice_line`]), and a notice event of its own in the live stream (after the output
    /// before it, which the chunker gives up first).
    fn notice(&mut self, text: String) {
        self.flush();
        let line = notice_line(&text);
        self.capture.push(line.as_bytes());
        if self.live_sent <= self.live_limit && self.live.is_some() {
            self.live_sent += line.len();
            self.pending_bytes += line.len();
            self.pending.push_back(OutputEvent::Notice(text.clone()));
        }
        self.notices.push(text);
    }

    /// The first event waiting for the stream.
    fn take_pending(&mut self) -> Option<OutputEvent> {
        let event = self.pending.pop_front()?;
        self.pending_bytes -= match &event {
            OutputEvent::Output(text) => text.len(),
            OutputEvent::Notice(text) => notice_line(text).len(),
        };
        Some(event)
    }

    fn clear_pending(&mut self) {
        self.pending.clear();
        self.pending_bytes = 0;
    }

    fn flush(&mut self) {
        let text = self.chunker.finish();
        if !text.is_empty() {
            self.queue(&text);
        }
    }

    /// Sends what waits (waiting for room, or until the reader is gone) and ends the stream.
    async fn deliver(&mut self) {
        if let Some(live) = self.live.take() {
            while let Some(event) = self.take_pending() {
                if live.send(event).await.is_err() {
                    break;
                }
            }
        }
    }
}

/// Room for one chunk in the stream; `None` when its reader is gone.
async fn reserve(
    live: &Option<mpsc::Sender<OutputEvent>>,
) -> Option<mpsc::Permit<'_, OutputEvent>> {
    match live {
        Some(live) => live.reserve().await.ok(),
        None => None,
    }
}

/// Where a run starts, decided when it is started (so the handle knows it at once).
struct CwdPlan {
    /// The directory; `Err` when there is none to run in (the message says why).
    cwd: Result<PathBuf, (PathBuf, String)>,
    /// What to tell the user before the output (a deleted cwd replaced by the root).
    notices: Vec<String>,
    /// Whether a `cd` in this run moves the session (not for a per-run cwd).
    persist: bool,
}

impl CwdPlan {
    fn shown(&self) -> PathBuf {
        match &self.cwd {
            Ok(cwd) | Err((cwd, _)) => cwd.clone(),
        }
    }
}

fn plan_cwd(session: &Session, asked: Option<&Path>) -> CwdPlan {
    let inner = &session.inner;
    if let Some(asked) = asked {
        let cwd = session.cwd().join(asked);
        let cwd = if cwd.is_dir() {
            Ok(cwd)
        } else {
            let message = format!(
                "the working directory {} given for this run is not an existing directory; \
                 give an existing one, or none to run in the session's",
                cwd.display()
            );
            Err((cwd, message))
        };
        return CwdPlan {
            cwd,
            notices: Vec::new(),
            persist: false,
        };
    }
    let previous = session.cwd();
    if previous.is_dir() {
        return CwdPlan {
            cwd: Ok(previous),
            notices: Vec::new(),
            persist: true,
        };
    }
    if inner.root.is_dir() {
        *inner.cwd.lock().unwrap() = inner.root.clone();
        return CwdPlan {
            cwd: Ok(inner.root.clone()),
            notices: vec![format!(
                "the working directory {} no longer exists; running in the session root {} instead",
                previous.display(),
                inner.root.display()
            )],
            persist: true,
        };
    }
    let message = format!(
        "the session root {} no longer exists; start a new session in an existing directory",
        inner.root.display()
    );
    CwdPlan {
        cwd: Err((previous, message)),
        notices: Vec::new(),
        persist: true,
    }
}

/// Starts `request` on a new task; see [`Session::start`].
pub(super) fn start(session: Session, request: RunRequest) -> RunHandle {
    let (live, output) = mpsc::channel(LIVE_CHANNEL_CHUNKS);
    let control = Arc::new(Control::default());
    let plan = plan_cwd(&session, request.cwd.as_deref());
    let cwd = plan.shown();
    // Dropped when the task ends, started or not: wakes `RunHandle::pid`'s waiters.
    let ended = super::handle::Ended(control.clone());
    let task_control = control.clone();
    let task = tokio::spawn(async move {
        let _ended = ended;
        run(session, request, plan, task_control, live).await
    });
    RunHandle::new(cwd, output, control, task)
}

/// The environment of one run: the engine's scrubbed one (without the agent's `OLDPWD` and any
/// `BASH_ENV`), the session's shell state (its exported variables, its previous directory), then
/// the request's kept and set variables. The prelude's own are added over it (nothing overrides
/// them), and without the prelude no `BASH_ENV` is left: bash sources no file of anyone's.
pub(super) fn run_env(
    session: &super::session::SessionInner,
    request: &RunRequest,
) -> Vec<(OsString, OsString)> {
    let engine = &session.engine.inner;
    let mut vars: Vec<(OsString, OsString)> = engine.env().vars.clone();
    vars.retain(|(name, _)| name != "OLDPWD");
    let scrubbed_values = session.scrubbed_values();
    {
        // Borrowed under the lock, not cloned: only the values taken are copied.
        let shell = session.shell.lock().unwrap();
        for (name, value) in &shell.vars {
            vars.retain(|(existing, _)| existing.to_str() != Some(name.as_str()));
            if let Some(value) = value
                .as_ref()
                .filter(|v| !scrubbed_values.contains(&v.as_os_str()))
            {
                vars.push((name.into(), value.clone()));
            }
        }
        if let Some(previous) = &shell.previous_dir {
            vars.push(("OLDPWD".into(), previous.into()));
        }
    }
    let mut put = |name: OsString, value: OsString| {
        vars.retain(|(existing, _)| *existing != name);
        vars.push((name, value));
    };
    for name in &request.env_keep {
        if let Some((_, value)) = engine.env_source.iter().find(|(n, _)| n == name.as_str()) {
            put(name.into(), value.clone());
        }
    }
    for (name, value) in &request.env_set {
        put(name.into(), value.into());
    }
    vars.retain(|(name, _)| name != "BASH_ENV");
    vars
}

/// Why bash cannot be given `script` at all, in the user's terms: a NUL byte (a C string, which
/// `bash -c` and every program's arguments are, ends at the first one).
fn script_bash_cannot_take(script: &str) -> Option<String> {
    let at = script.find('\0')?;
    let line = script[..at].matches('\n').count() + 1;
    let column = script[..at]
        .rfind('\n')
        .map_or(at, |newline| at - newline - 1)
        + 1;
    Some(format!(
        "the script was not run: it holds a NUL byte (line {line}, column {column}), and bash \
         cannot take one in a script. Remove it (pasted binary data often brings one)"
    ))
}

/// Why a command did not start, in the user's terms: the limit reached (EAGAIN), what is wrong
/// with bash or the script, else the step's or the kernel's own words.
fn could_not_start(bash: &std::path::Path, error: &std::io::Error, step: bool) -> String {
    let errno = error.raw_os_error();
    #[cfg(target_os = "linux")]
    let errno = errno.or_else(|| {
        error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<crate::sandbox::StepError>())
            .and_then(|step| step.io_error().raw_os_error())
    });
    let bash = bash.display();
    match errno {
        Some(libc::EAGAIN) => sandbox::no_process_could_be_started(),
        Some(libc::ENOMEM) if !step => {
            "no process could be started: the system is out of memory".to_string()
        }
        Some(libc::E2BIG) => format!(
            "could not start {bash}: the command's environment and arguments are larger than \
             the kernel lets a program start with (E2BIG); unset large variables, or \
             pass less with `--set-env`"
        ),
        Some(libc::ENOENT) if !step => format!(
            "could not start {bash}: it does not exist (install bash, or put one on the \
             commands' PATH)"
        ),
        Some(libc::EACCES) if !step => {
            format!("could not start {bash}: this user may not execute it (permission denied)")
        }
        Some(libc::ENOEXEC) => {
            format!("could not start {bash}: it is not a program this machine can run")
        }
        _ if step => error.to_string(),
        _ => format!("could not start {bash}: {error}"),
    }
}

async fn run(
    session: Session,
    request: RunRequest,
    plan: CwdPlan,
    control: Arc<Control>,
    live: mpsc::Sender<OutputEvent>,
) -> RunOutcome {
    let started_at = Instant::now();
    let engine = &session.inner.engine.inner;
    let config = &engine.config;
    let (keep_head, keep_tail) = match request.output_limit {
        Some(limit) => (limit / 2, limit - limit / 2),
        None => (config.keep_head_bytes, config.keep_tail_bytes),
    };
    let mut output = Output {
        chunker: Chunker::default(),
        capture: Capture::with_log_limits(
            keep_head,
            keep_tail,
            LogLimits {
                dir: config.log_dir.clone(),
                max_bytes: config.max_log_bytes,
                budget_bytes: config.log_budget_bytes,
                disk_reserve: config.log_disk_reserve,
            },
        ),
        live: Some(live),
        pending: VecDeque::new(),
        pending_bytes: 0,
        live_sent: 0,
        live_limit: request.live_limit.unwrap_or(usize::MAX),
        notices: Vec::new(),
    };
    for notice in plan.notices {
        output.notice(notice);
    }
    let cwd = match plan.cwd {
        Ok(cwd) => cwd,
        Err((cwd, message)) => {
            output.notice(message);
            return not_started(output, cwd, started_at, 126).await;
        }
    };

    if let Some(why) = script_bash_cannot_take(&request.script) {
        output.notice(why);
        return not_started(output, cwd, started_at, 126).await;
    }
    let mut env = run_env(&session.inner, &request);
    // Only a run in the session's directory keeps its state, and only a script that may change
    // it needs the prelude's report (a `cargo test` or an `ls` does not pay for it).
    let report = plan.persist
        && !(super::stateless::cannot_change_state(&request.script)
            && super::stateless::env_allows_stateless(
                env.iter().map(|(name, _)| name.as_os_str()),
            ));
    let shell = match session.inner.engine.prelude().and_then(|prelude| {
        prelude
            .shell(request.script.clone(), report)
            .map_err(|e| e.to_string())
    }) {
        Ok(shell) => shell,
        Err(message) => {
            output.notice(message);
            return not_started(output, cwd, started_at, 126).await;
        }
    };
    let launch = Launch {
        program: engine.bash.clone(),
        args: shell.args,
    };
    let mode = request.sandbox_mode.unwrap_or_else(|| session.mode());
    let mut roots = session.inner.roots(mode);
    if matches!(mode, sandbox::Mode::Workspace | sandbox::Mode::ReadOnly) {
        roots.also_writable = request.also_writable.clone();
    }
    if mode == sandbox::Mode::Workspace {
        roots.also_hosts = request.also_hosts.clone();
    }
    let roots_proxied = roots.proxied_network;
    // The first command (and a home's first workspace command) probes the kernel in children
    // it waits for: off the runtime, which must never block on a child (issue 20 point 9).
    let confined = if sandbox::confine_would_probe(mode, &roots) {
        let limits = config.limits;
        let confining =
            tokio::task::spawn_blocking(move || sandbox::confine(launch, mode, &roots, limits));
        match confining.await {
            Ok(done) => done,
            Err(error) => {
                output.notice(format!("acp-bash could not set up the sandbox: {error}"));
                return not_started(output, cwd, started_at, 126).await;
            }
        }
    } else {
        sandbox::confine(launch, mode, &roots, config.limits)
    };
    if config.require_sandbox {
        if let Some(refused) = sandbox::refusal(mode) {
            output.notice(refused);
            return not_started(output, cwd, started_at, 126).await;
        }
    }
    let first_run_in_mode =
        session.inner.announced_mode.lock().unwrap().replace(mode) != Some(mode);
    if first_run_in_mode {
        for notice in &confined.notices {
            output.notice(notice.clone());
        }
    }
    for (name, value) in shell.env {
        env.retain(|(existing, _)| *existing != name);
        env.push((name, value));
    }
    // Workspace mode's allowlist: the tools find the proxy on the namespace's loopback.
    let proxied = mode == sandbox::Mode::Workspace
        && roots_proxied
        && sandbox::network_proxied_here(sandbox::Support::current()).is_ok();
    if proxied {
        for (name, value) in crate::netproxy::proxy_env(crate::netproxy::PROXY_PORT) {
            env.retain(|(existing, _)| existing != name);
            env.push((name.into(), value.into()));
        }
    }
    let mut started = match process::start(
        confined,
        env,
        cwd.clone(),
        shell.pass,
        Some(session.inner.sandbox.clone()),
        if config.fork_bare_commands_in_place {
            process::ForkOn::CallingThreadWhenBare
        } else {
            process::ForkOn::SpawnerThread
        },
    )
    .await
    {
        Ok(started) => started,
        Err(error) => {
            let step = sandbox::is_setup_failure(&error);
            let code = if error.kind() == std::io::ErrorKind::NotFound && !step {
                127
            } else {
                126
            };
            output.notice(could_not_start(&engine.bash, &error, step));
            return not_started(output, cwd, started_at, code).await;
        }
    };

    // The environment it started with comes back from the spawn (not a copy made before it).
    let start_env = shell
        .report
        .is_some()
        .then(|| std::mem::take(&mut started.env));
    let timeout = request.timeout.unwrap_or(config.default_timeout);
    let pid = started.pgid;
    let ended = supervise(started, &mut output, &control, timeout, config).await;
    sandbox::command_ended();
    let mut blocked_hosts: Vec<String> = Vec::new();
    if let Some(network) = &session.inner.sandbox.network {
        network.ended(pid);
        // Read from the proxy's own record, never from the command's output.
        for blocked in network.take_blocks() {
            output.notice(blocked.reason.trim_start_matches("acp-bash ").to_string());
            if !blocked_hosts.contains(&blocked.host) {
                blocked_hosts.push(blocked.host);
            }
        }
    }
    let report = match shell.report.as_ref().map(prelude::read_report) {
        None => prelude::Report::default(),
        Some(Ok(received)) => prelude::parse_report(&received),
        Some(Err(error)) => prelude::Report {
            cwd: None,
            exported: Some(Err(format!(
                "the shell's report could not be read ({error})"
            ))),
        },
    };
    if let Some(start_env) = start_env {
        // Only a run in the session's directory changes its state (as only its `cd` moves it).
        for notice in session
            .inner
            .take_exported(&request, &start_env, report.exported)
        {
            output.notice(notice);
        }
        output.flush();
    }
    output.deliver().await;

    let captured = output.capture.finish();
    let mut text = captured.text;
    let mut notices = output.notices;
    if let Some(error) = captured.log_error {
        text.push_str(&format!("[acp-bash: {error}]\n"));
        notices.push(error);
    }
    let recorded = report.cwd;
    let next_cwd = match recorded {
        // A run that changed directory moves the session when it ends (the last to end wins).
        Some(recorded) if plan.persist => {
            *session.inner.cwd.lock().unwrap() = recorded.clone();
            recorded
        }
        Some(_) => session.cwd(),
        None if plan.persist => cwd.clone(),
        None => session.cwd(),
    };
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
        next_shell_state: Some(session.shell_state()),
        notices,
        duration: started_at.elapsed(),
        blocked_hosts,
    }
}

/// Kills the process group if the run is dropped before it ended (its runtime shut down, say):
/// nothing the command started outlives the run.
struct GroupGuard<'a> {
    control: &'a Control,
}

impl Drop for GroupGuard<'_> {
    fn drop(&mut self) {
        let mut pgid = self.control.pgid.lock().unwrap();
        if let Some(group) = pgid.take() {
            signal_group(group, libc::SIGKILL);
        }
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
    output: &mut Output,
    control: &Control,
    timeout: std::time::Duration,
    config: &super::EngineConfig,
) -> Ended {
    let Started {
        mut child,
        pgid,
        output: mut pipe,
        ..
    } = started;
    *control.pgid.lock().unwrap() = Some(pgid);
    let _ = control.pid.set(pgid as u32);
    control.started.notify_waiters();
    // Dropped at the end of the run, or with this future: kills whatever is left of the group.
    let guard = GroupGuard { control };
    let cancel = &control.cancel;
    // Not zeroed: `read_buf` reads into the spare capacity, and only what was read is looked at
    // (zeroing 64 KiB on every run was a third of the engine's instructions for a `true`).
    let mut buffer: Vec<u8> = Vec::with_capacity(READ_BUFFER_BYTES);
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
        let live = output.live.clone();
        tokio::select! {
            read = pipe.read_buf(&mut buffer), if reading && output.can_read() => match read {
                Ok(0) | Err(_) => reading = false,
                Ok(_) => {
                    output.push(&buffer);
                    buffer.clear();
                }
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
                } else if control.dropped.load(Ordering::SeqCst) {
                    // The handle was dropped: it killed the group already; make sure.
                    signal_group(pgid, libc::SIGKILL);
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
            () = sleep_until(give_up_pipe_at), if reading && output.can_read() => {
                // What the pipe holds now was written before the grace ran out. On a busy
                // machine this timer and a ready read come due together, and `select!` picks
                // either: read it first, so that the shell's last output is never dropped.
                drain_ready(&pipe, &mut buffer, output);
                reading = false;
            }
            permit = reserve(&live), if !output.pending.is_empty() => match permit {
                Some(permit) => {
                    if let Some(event) = output.take_pending() {
                        permit.send(event);
                    }
                }
                None => {
                    output.live = None;
                    output.clear_pending();
                }
            },
        }
    }
    // Whatever the command left running in its group goes with the run. A run that was
    // cancelled or timed out is also gone when its outcome comes: no process of the command
    // still runs then (one `kill(-pgid, 0)` when the group is empty; a scan of /proc only
    // when something of it is left, zombies not counting).
    drop(guard);
    // After the SIGKILL only the kernel's scheduling decides when the group is gone: bounded by
    // GONE_AFTER_KILL, not by the grace a command gets to exit on its own (1 s was too short
    // under process churn).
    let bound = GONE_AFTER_KILL.max(config.kill_grace);
    if (cancelled || timed_out) && !process::wait_until_group_gone(pgid, bound).await {
        tracing::warn!(
            pgid,
            ?bound,
            "the command's group was still there after it was killed"
        );
        output.notice(format!(
            "some of the command's processes were still there {} after they were killed \
             (stuck in the kernel?); see `ps -g {pgid}`",
            crate::text::human_duration(bound)
        ));
    }
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

/// How long a killed run waits for its process group to be gone before its outcome says that
/// something of it is still there. A SIGKILLed process cannot outlive it unless the kernel keeps
/// it (uninterruptible sleep).
const GONE_AFTER_KILL: std::time::Duration = std::time::Duration::from_secs(30);

/// The most the run reads from its pipe at the end without waiting: more than a pipe holds (an
/// unprivileged process may grow its pipe to `/proc/sys/fs/pipe-max-size`, 1 MiB by default).
const MAX_FINAL_READ_BYTES: usize = 1024 * 1024;

/// Reads what `pipe` holds right now without waiting for more (the fd is non-blocking), at most
/// [`MAX_FINAL_READ_BYTES`] (a grandchild that keeps writing is cut off there).
fn drain_ready(pipe: &tokio::net::unix::pipe::Receiver, buffer: &mut Vec<u8>, output: &mut Output) {
    use std::os::fd::AsRawFd;
    let mut read = 0;
    buffer.clear();
    while read < MAX_FINAL_READ_BYTES {
        // SAFETY: reads into our own buffer's spare capacity (its whole capacity: it is empty),
        // from the run's open pipe; only the `n` bytes the kernel wrote are then taken as set.
        let n = unsafe {
            libc::read(
                pipe.as_raw_fd(),
                buffer.as_mut_ptr().cast(),
                buffer.capacity(),
            )
        };
        match usize::try_from(n) {
            // End of file.
            Ok(0) => break,
            Ok(n) => {
                // SAFETY: the kernel wrote these `n` bytes (n ≤ capacity).
                unsafe { buffer.set_len(n) };
                output.push(buffer);
                buffer.clear();
                read += n;
            }
            Err(_) if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {
            }
            // Empty for now (EAGAIN), or unreadable: nothing more to read without waiting.
            Err(_) => break,
        }
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
async fn not_started(
    mut output: Output,
    cwd: PathBuf,
    started_at: Instant,
    code: i32,
) -> RunOutcome {
    output.flush();
    output.deliver().await;
    let captured = output.capture.finish();
    RunOutcome {
        output: captured.text,
        status: RunStatus::exited(code),
        next_cwd: cwd.clone(),
        next_shell_state: None,
        cwd,
        notices: output.notices,
        duration: started_at.elapsed(),
        blocked_hosts: Vec::new(),
    }
}
