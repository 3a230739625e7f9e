//! `/bg SCRIPT`: starts SCRIPT as a background job of the session.

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{inline_code, Command, CommandHost, CommandSpec, Run};
use crate::jobs::{Job, StartError};

/// `/bg`.
pub const COMMAND: Command = Command::new(SPEC, parse);

/// What the agent advertises about `/bg`.
pub const SPEC: CommandSpec = CommandSpec {
    name: "bg",
    description: "Run a bash script in the background (dev servers, watchers, tail -f): the turn \
                  ends at once, the job keeps running",
    hint: "script to run in the background, e.g. npm run dev",
    usage: "/bg SCRIPT",
};

/// `/bg SCRIPT`'s argument.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Bg {
    /// The script to run.
    pub script: String,
}

impl Bg {
    /// `/bg SCRIPT`.
    pub fn new(script: impl Into<String>) -> Self {
        Bg {
            script: script.into(),
        }
    }
}

fn parse(args: &str) -> Result<Box<dyn Run>, String> {
    if args.is_empty() {
        return Err("give the script to run in the background, e.g. `/bg npm run dev`".into());
    }
    Ok(Box::new(Bg {
        script: args.to_string(),
    }))
}

impl Run for Bg {
    fn run<'a>(self: Box<Self>, host: &'a dyn CommandHost) -> BoxFuture<'a, String> {
        async move {
            match host.start_job(self.script).await {
                Ok(job) => started(&job, host.shows_jobs_live()),
                Err(error) => refused(&error),
            }
        }
        .boxed()
    }
}

/// The message for a job that started. `card`: the client shows the job's output as it comes (a live card or console view).
pub fn started(job: &Job, card: bool) -> String {
    let id = job.id();
    let Some(pid) = job.pid() else {
        return format!(
            "Job {id} could not start: {}. Its output says why (`/logs {id}`).",
            inline_code(job.command(), 60)
        );
    };
    let output = if card {
        "its tool call shows the output as it comes"
    } else {
        "its output is shown when it ends"
    };
    format!(
        "Started job {id} (pid {pid}): {}. It keeps running after this turn; {output}. \
         `/logs {id}` shows its last lines, `/kill {id}` stops it, `/jobs` lists the jobs.",
        inline_code(job.command(), 60)
    )
}

/// The message for a job that was not started.
pub fn refused(error: &StartError) -> String {
    format!("No job was started: {error}.")
}
