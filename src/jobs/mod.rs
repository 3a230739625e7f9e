//! Background jobs: bash scripts that keep running after the call that started them, owned by
//! a session. Provider-neutral (no ACP types): the agent's `/bg`, `/jobs`, `/kill` and `/logs`
//! are built on it, and so can a model-driven agent's `run_in_background`, "read a job's output"
//! and "kill a job" tools.
//!
//! Owns: the per-session [`JobRegistry`] (numbering from 1, the running-jobs limit, killing one
//! job or all of them, and killing all of them when the registry is dropped), each [`Job`]'s
//! state, and its bounded output ([`output`]). A job runs through the engine like any command,
//! in the session's sandbox mode and current directory, with the engine's process-tree kill,
//! so nothing it started outlives it; it has no timeout unless [`JobLimits::timeout`] sets one.
//! Must not touch: how a job is shown (the driver's commands and the ACP layer do that).
//!
//! ```no_run
//! use std::path::Path;
//! use acp_bash::exec::{Engine, EngineConfig};
//! use acp_bash::jobs::{JobLimits, JobRegistry};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let engine = Engine::new(EngineConfig::default());
//! let session = engine.session(Path::new("/home/me/project"))?;
//! let jobs = JobRegistry::new(JobLimits::default());
//!
//! // run_in_background: start it, tell the model its id.
//! let (job, mut live) = jobs.start(&session, "npm run dev".into()).await?;
//! println!("started job {} (pid {:?})", job.id(), job.pid());
//! tokio::spawn(async move { while let Some(_chunk) = live.next().await { /* stream it */ } });
//!
//! // read a job's output: the last 50 lines, bounded however much it printed.
//! println!("{}", job.last_lines(50));
//!
//! // kill a job (its whole process tree), then learn how it ended.
//! jobs.kill(job.id());
//! let outcome = job.wait().await;
//! println!("{:?}", outcome.status);
//! # Ok(())
//! # }
//! ```

pub mod output;
mod start;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::exec::{signal_name, Exit, RunOutcome, RunStatus, Session};
use output::JobOutput;

/// The timeout of a job when [`JobLimits::timeout`] sets none: longer than any machine's uptime.
const NO_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// How many ended jobs a registry remembers (for `/jobs` and `/logs`); older ones are forgotten.
const KEEP_ENDED: usize = 32;

/// The settings of a [`JobRegistry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobLimits {
    /// How many jobs of one registry may run at once (default 8); starting one more is refused.
    pub max_running: usize,
    /// Kill a job after this long (default: never).
    pub timeout: Option<Duration>,
    /// Bytes of output kept from the start and from the end of each job (32 KiB each, like a
    /// command's result); the middle is dropped with a gap line.
    pub keep_head_bytes: usize,
    /// Bytes of output kept from the end of each job (see `keep_head_bytes`).
    pub keep_tail_bytes: usize,
}

impl Default for JobLimits {
    fn default() -> Self {
        JobLimits {
            max_running: 8,
            timeout: None,
            keep_head_bytes: 32 * 1024,
            keep_tail_bytes: 32 * 1024,
        }
    }
}

/// A job's number in its registry: 1, 2, 3… Written `1` or `%1` (as bash's job specs). Handed
/// out by the registry, or parsed from text (`"%1".parse()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why a text is not a job id (made by [`JobId`]'s `FromStr`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BadJobId(pub String);

impl fmt::Display for BadJobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a job id: write the number `/jobs` shows, like 1 or %1",
            self.0
        )
    }
}

impl std::error::Error for BadJobId {}

impl FromStr for JobId {
    type Err = BadJobId;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let digits = text.strip_prefix('%').unwrap_or(text);
        match digits.parse::<u64>() {
            Ok(n) if n > 0 && digits.bytes().all(|b| b.is_ascii_digit()) => Ok(JobId(n)),
            _ => Err(BadJobId(text.to_string())),
        }
    }
}

/// Where a job is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobState {
    /// It has not ended yet.
    Running,
    /// It ended; how, as the status markers say it.
    Ended(RunStatus),
}

impl fmt::Display for JobState {
    /// `running`, `exited 0`, `killed by SIGTERM`, `timed out, killed by SIGTERM`, …
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self {
            JobState::Running => return write!(f, "running"),
            JobState::Ended(status) => status,
        };
        if status.timed_out_after.is_some() {
            write!(f, "timed out, ")?;
        }
        match (
            status.exit,
            status.cancelled || status.timed_out_after.is_some(),
        ) {
            (Exit::Signal(signal), _) => write!(f, "killed by {}", signal_name(signal)),
            (Exit::Code(code), false) => write!(f, "exited {code}"),
            (Exit::Code(code), true) => write!(f, "killed (exit code {code})"),
        }
    }
}

/// Why a job was not started.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartError {
    /// `limit` jobs already run (their ids are `running`).
    TooMany {
        /// The most jobs that may run at once.
        limit: usize,
        /// The ids of the jobs running now.
        running: Vec<JobId>,
    },
    /// The registry was shut down (its session is closing).
    Closed,
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::TooMany { limit, running } => {
                let ids: Vec<String> = running.iter().map(|id| id.to_string()).collect();
                write!(
                    f,
                    "{limit} jobs are already running in this session (jobs {}), the most \
                     allowed: stop one with /kill ID first (the agent's --max-jobs flag sets the \
                     limit)",
                    ids.join(", ")
                )
            }
            StartError::Closed => write!(f, "this session is closing: no new job can start"),
        }
    }
}

impl std::error::Error for StartError {}

/// The background jobs of one session. Cheap to clone (shared state); when the last clone is
/// dropped, every job still running is killed.
#[derive(Clone)]
#[non_exhaustive]
pub struct JobRegistry {
    inner: Arc<Registry>,
}

struct Registry {
    limits: JobLimits,
    next_id: AtomicU64,
    jobs: Mutex<BTreeMap<JobId, Job>>,
    closed: AtomicBool,
    /// The tasks that run and watch the jobs: [`JobRegistry::shutdown`] waits for them.
    tasks: TaskTracker,
}

impl Drop for Registry {
    fn drop(&mut self) {
        for job in self.jobs.get_mut().unwrap().values() {
            job.kill();
        }
    }
}

impl JobRegistry {
    /// An empty registry whose jobs are bounded by `limits`.
    pub fn new(limits: JobLimits) -> Self {
        JobRegistry {
            inner: Arc::new(Registry {
                limits,
                next_id: AtomicU64::new(1),
                jobs: Mutex::new(BTreeMap::new()),
                closed: AtomicBool::new(false),
                tasks: TaskTracker::new(),
            }),
        }
    }

    /// The limits the registry was made with.
    pub fn limits(&self) -> JobLimits {
        self.inner.limits
    }

    /// Starts `command` as a job in `session`'s current directory and sandbox mode, and returns
    /// it once its shell has started (or failed to: then the job has already ended and its
    /// output says why), with the stream of its output from the first byte.
    ///
    /// The job runs in a detached copy of the session: its `cd`s do not move the session. Must
    /// be called inside a tokio runtime, from a task on a long-lived worker thread.
    pub async fn start(
        &self,
        session: &Session,
        command: String,
    ) -> Result<(Job, LiveOutput), StartError> {
        let limits = self.inner.limits;
        let job = {
            let mut jobs = self.inner.jobs.lock().unwrap();
            if self.inner.closed.load(Ordering::SeqCst) {
                return Err(StartError::Closed);
            }
            let running: Vec<JobId> = jobs
                .values()
                .filter(|job| job.is_running())
                .map(Job::id)
                .collect();
            if running.len() >= limits.max_running {
                return Err(StartError::TooMany {
                    limit: limits.max_running,
                    running,
                });
            }
            forget_old_ended(&mut jobs);
            let id = JobId(self.inner.next_id.fetch_add(1, Ordering::Relaxed));
            let job = Job {
                shared: Arc::new(Shared {
                    id,
                    command: command.clone(),
                    cwd: OnceLock::new(),
                    started_at: Instant::now(),
                    pid: OnceLock::new(),
                    cancel: CancellationToken::new(),
                    output: Mutex::new(JobOutput::new(
                        limits.keep_head_bytes,
                        limits.keep_tail_bytes,
                    )),
                    ended: watch::channel(None).0,
                }),
            };
            jobs.insert(id, job.clone());
            job
        };
        let _ = job.shared.cwd.set(session.cwd());

        let timeout = limits.timeout.unwrap_or(NO_TIMEOUT);
        let run = start::start_run(session, command, timeout).await;
        if let Some(pid) = run.pid {
            let _ = job.shared.pid.set(pid);
        }
        let (live_tx, live_rx) = mpsc::unbounded_channel();
        let watched = job.clone();
        let mut handle = run.handle;
        // The task owns the run's handle: if the task is dropped (the runtime goes away), the
        // handle's drop kills the job's process group.
        self.inner.tasks.spawn(async move {
            let kill = watched.shared.cancel.clone();
            let mut keep = |chunk: String| {
                watched.shared.output.lock().unwrap().push(&chunk);
                let _ = live_tx.send(chunk);
            };
            handle.drain(&mut keep, &kill).await;
            let outcome = handle.wait().await;
            tracing::info!(job = %watched.id(), status = ?outcome.status, "job ended");
            watched.shared.ended.send_replace(Some(Arc::new(outcome)));
        });
        tracing::info!(job = %job.id(), pid = ?job.pid(), command = %job.command(), "job started");
        Ok((job, LiveOutput { chunks: live_rx }))
    }

    /// The job `id`, if this registry has it (running, or ended and still remembered).
    pub fn get(&self, id: JobId) -> Option<Job> {
        self.inner.jobs.lock().unwrap().get(&id).cloned()
    }

    /// Every job this registry remembers, by id.
    pub fn list(&self) -> Vec<Job> {
        self.inner.jobs.lock().unwrap().values().cloned().collect()
    }

    /// How many jobs are running.
    pub fn running(&self) -> usize {
        let jobs = self.inner.jobs.lock().unwrap();
        jobs.values().filter(|job| job.is_running()).count()
    }

    /// Kills job `id` (its whole process tree: SIGTERM, then SIGKILL after the engine's grace)
    /// and returns it, to [`Job::wait`] for; `None` if there is no such job.
    pub fn kill(&self, id: JobId) -> Option<Job> {
        let job = self.get(id)?;
        job.kill();
        Some(job)
    }

    /// Kills every job of this registry (what closing a session does). Does not wait.
    pub fn kill_all(&self) {
        for job in self.list() {
            job.kill();
        }
    }

    /// Refuses new jobs, kills every job, and waits until each has ended and been reaped.
    pub async fn shutdown(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        self.kill_all();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
    }
}

/// Forgets the oldest ended jobs so that at most [`KEEP_ENDED`] ended ones stay listed.
fn forget_old_ended(jobs: &mut BTreeMap<JobId, Job>) {
    let ended: Vec<JobId> = jobs
        .values()
        .filter(|job| !job.is_running())
        .map(Job::id)
        .collect();
    for id in ended
        .iter()
        .take(ended.len().saturating_sub(KEEP_ENDED - 1))
    {
        jobs.remove(id);
    }
}

/// A job's output as it arrives, from its first byte; ends when the job has ended.
#[non_exhaustive]
pub struct LiveOutput {
    chunks: mpsc::UnboundedReceiver<String>,
}

impl LiveOutput {
    /// The next chunk of output (whole characters and escape sequences), or `None` once the job
    /// has ended and everything was read.
    pub async fn next(&mut self) -> Option<String> {
        self.chunks.recv().await
    }
}

impl futures::Stream for LiveOutput {
    type Item = String;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<String>> {
        self.chunks.poll_recv(cx)
    }
}

/// One background job: a handle to look at it, kill it, or wait for its end. Cheap to clone.
#[derive(Clone)]
#[non_exhaustive]
pub struct Job {
    shared: Arc<Shared>,
}

struct Shared {
    id: JobId,
    command: String,
    cwd: OnceLock<PathBuf>,
    started_at: Instant,
    pid: OnceLock<u32>,
    cancel: CancellationToken,
    output: Mutex<JobOutput>,
    ended: watch::Sender<Option<Arc<RunOutcome>>>,
}

impl Job {
    /// Its id in the session.
    pub fn id(&self) -> JobId {
        self.shared.id
    }

    /// The script it runs.
    pub fn command(&self) -> &str {
        &self.shared.command
    }

    /// The directory it started in.
    pub fn cwd(&self) -> &PathBuf {
        self.shared.cwd.get().expect("set when the job is made")
    }

    /// The pid of its shell as this process sees it (the process group the kill signals);
    /// `None` if the shell never started.
    pub fn pid(&self) -> Option<u32> {
        self.shared.pid.get().copied()
    }

    /// Whether it still runs, or how it ended.
    pub fn state(&self) -> JobState {
        match &*self.shared.ended.borrow() {
            None => JobState::Running,
            Some(outcome) => JobState::Ended(outcome.status.clone()),
        }
    }

    /// Whether it has not ended yet.
    pub fn is_running(&self) -> bool {
        self.shared.ended.borrow().is_none()
    }

    /// How long it has run (until now, or until it ended).
    pub fn elapsed(&self) -> Duration {
        match &*self.shared.ended.borrow() {
            None => self.shared.started_at.elapsed(),
            Some(outcome) => outcome.duration,
        }
    }

    /// The last `n` lines of what it printed so far (bounded: see [`JobLimits`]).
    pub fn last_lines(&self, n: usize) -> String {
        self.shared.output.lock().unwrap().last_lines(n)
    }

    /// The engine's outcome once it has ended: the kept output, the status, where the full
    /// output was logged if it was too large.
    pub fn outcome(&self) -> Option<Arc<RunOutcome>> {
        self.shared.ended.borrow().clone()
    }

    /// Kills it (its whole process tree); nothing happens if it has already ended.
    pub fn kill(&self) {
        if self.is_running() {
            tracing::info!(job = %self.id(), "killing job");
        }
        self.shared.cancel.cancel();
    }

    /// Waits until it has ended (and been reaped), and returns the engine's outcome.
    pub async fn wait(&self) -> Arc<RunOutcome> {
        let mut ended = self.shared.ended.subscribe();
        let outcome = ended
            .wait_for(Option::is_some)
            .await
            .expect("the job owns its sender");
        outcome.clone().expect("waited for Some")
    }
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.id())
            .field("pid", &self.pid())
            .field("command", &self.command())
            .field("state", &self.state())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_read_like_bash_job_specs() {
        assert_eq!("1".parse(), Ok(JobId(1)));
        assert_eq!("%12".parse(), Ok(JobId(12)));
        for bad in ["", "%", "0", "%0", "-1", "+1", "1a", "%%1", "one", " 1"] {
            assert!(bad.parse::<JobId>().is_err(), "{bad:?}");
        }
        let message = "x".parse::<JobId>().unwrap_err().to_string();
        assert!(message.contains("like 1 or %1"), "{message}");
    }

    fn ended(exit: Exit, cancelled: bool, timed_out: bool) -> JobState {
        JobState::Ended(RunStatus {
            exit,
            cancelled,
            timed_out_after: timed_out.then(|| Duration::from_secs(5)),
            truncation: None,
        })
    }

    #[test]
    fn states_say_how_the_job_ended() {
        assert_eq!(JobState::Running.to_string(), "running");
        assert_eq!(ended(Exit::Code(0), false, false).to_string(), "exited 0");
        assert_eq!(ended(Exit::Code(3), false, false).to_string(), "exited 3");
        assert_eq!(
            ended(Exit::Signal(libc::SIGTERM), true, false).to_string(),
            "killed by SIGTERM"
        );
        assert_eq!(
            ended(Exit::Signal(libc::SIGKILL), false, false).to_string(),
            "killed by SIGKILL"
        );
        assert_eq!(
            ended(Exit::Code(143), true, false).to_string(),
            "killed (exit code 143)"
        );
        assert_eq!(
            ended(Exit::Signal(libc::SIGTERM), false, true).to_string(),
            "timed out, killed by SIGTERM"
        );
    }

    #[test]
    fn too_many_says_which_jobs_run_and_what_to_do() {
        let message = StartError::TooMany {
            limit: 2,
            running: vec![JobId(1), JobId(3)],
        }
        .to_string();
        assert!(message.contains("2 jobs are already running"), "{message}");
        assert!(message.contains("jobs 1, 3"), "{message}");
        assert!(message.contains("/kill"), "{message}");
        assert!(message.contains("--max-jobs"), "{message}");
    }
}
