//! `/kill ID` (or `/kill %ID`): kills a job's whole process tree.

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{inline_code, Command, CommandHost, CommandSpec, Run};
use crate::jobs::{Job, JobId, JobRegistry, JobState};

/// `/kill`.
pub const COMMAND: Command = Command::new(SPEC, parse);

/// What the agent advertises about `/kill`.
pub const SPEC: CommandSpec = CommandSpec {
    name: "kill",
    description: "Stop a background job and everything it started",
    hint: "job id, e.g. 1 or %1",
    usage: "/kill ID",
};

/// `/kill ID`'s argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Kill {
    /// The job to kill.
    pub id: JobId,
}

impl Kill {
    /// `/kill ID`.
    pub fn new(id: JobId) -> Self {
        Kill { id }
    }
}

fn parse(args: &str) -> Result<Box<dyn Run>, String> {
    let mut words = args.split_whitespace();
    let id = super::job_id(words.next())?;
    if let Some(extra) = words.next() {
        return Err(format!("/kill takes one job id, got also {extra:?}"));
    }
    Ok(Box::new(Kill { id }))
}

impl Run for Kill {
    /// Kills the job and answers once the client has been shown its end.
    fn run<'a>(self: Box<Self>, host: &'a dyn CommandHost) -> BoxFuture<'a, String> {
        async move {
            match kill(host.jobs(), self.id) {
                Ok(job) => {
                    host.job_shown_ended(&job).await;
                    killed(&job)
                }
                Err(message) => message,
            }
        }
        .boxed()
    }
}

/// Kills job `id` if it runs. `Ok(job)`: wait for it to end, then report with [`killed`].
/// `Err(message)`: there was nothing to kill, and the message says why.
pub fn kill(registry: &JobRegistry, id: JobId) -> Result<Job, String> {
    let Some(job) = registry.get(id) else {
        return Err(unknown(registry, id));
    };
    if let JobState::Ended(_) = job.state() {
        return Err(format!(
            "Job {id} ({}) had already ended: {}. Nothing to kill.",
            inline_code(job.command(), 60),
            job.state()
        ));
    }
    job.kill();
    Ok(job)
}

/// The message once a killed job has ended.
pub fn killed(job: &Job) -> String {
    format!(
        "Killed job {} ({}): {}.",
        job.id(),
        inline_code(job.command(), 60),
        job.state()
    )
}

/// The message for an id the session has no job for.
pub fn unknown(registry: &JobRegistry, id: JobId) -> String {
    let known: Vec<String> = registry
        .list()
        .iter()
        .map(|job| job.id().to_string())
        .collect();
    if known.is_empty() {
        format!("There is no job {id}: this session has no background jobs (start one with `/bg SCRIPT`).")
    } else {
        format!(
            "There is no job {id} in this session; its jobs are {}. `/jobs` lists them.",
            known.join(", ")
        )
    }
}
