//! `/logs ID [N]`: the last N lines (default 50) of a job's output, while it runs or after.

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{inline_code, Command, CommandHost, CommandSpec, Run};
use crate::jobs::{JobId, JobRegistry, JobState};
use crate::present::{ansi, console_block};

/// `/logs`.
pub const COMMAND: Command = Command::new(SPEC, parse);

/// What the agent advertises about `/logs`.
pub const SPEC: CommandSpec = CommandSpec {
    name: "logs",
    description: "Show the last lines of a background job's output (default 50)",
    hint: "job id and optional line count, e.g. 1 or 1 200",
    usage: "/logs ID [N]",
};

/// Lines shown when the command names no count.
pub const DEFAULT_LINES: usize = 50;

/// The most lines one `/logs` shows (the job keeps less than this anyway: see
/// [`crate::jobs::JobLimits`]).
pub const MAX_LINES: usize = 10_000;

/// `/logs ID [N]`'s arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Logs {
    /// The job whose output to show.
    pub id: JobId,
    /// How many of the last lines to show.
    pub lines: usize,
}

fn parse(args: &str) -> Result<Box<dyn Run>, String> {
    let mut words = args.split_whitespace();
    let id = super::job_id(words.next())?;
    let lines = match words.next() {
        None => DEFAULT_LINES,
        Some(word) => match word.parse::<usize>() {
            Ok(n) if (1..=MAX_LINES).contains(&n) => n,
            _ => {
                return Err(format!(
                    "{word:?} is not a line count: give a number from 1 to {MAX_LINES}"
                ))
            }
        },
    };
    if let Some(extra) = words.next() {
        return Err(format!(
            "/logs takes a job id and a line count, got also {extra:?}"
        ));
    }
    Ok(Box::new(Logs { id, lines }))
}

impl Run for Logs {
    fn run<'a>(self: Box<Self>, host: &'a dyn CommandHost) -> BoxFuture<'a, String> {
        futures::future::ready(answer(host.jobs(), self.id, self.lines)).boxed()
    }
}

/// The last `lines` lines of job `id` as a console block (escape sequences removed), or why
/// there are none.
pub fn answer(registry: &JobRegistry, id: JobId, lines: usize) -> String {
    let Some(job) = registry.get(id) else {
        return super::kill::unknown(registry, id);
    };
    let state = match job.state() {
        JobState::Running => "running".to_string(),
        ended => format!("ended: {ended}"),
    };
    let text = ansi::to_plain_text(&job.last_lines(lines));
    let mut answer = if text.is_empty() {
        format!(
            "Job {id} ({}, {state}) has printed nothing yet.",
            inline_code(job.command(), 60)
        )
    } else {
        let shown = text.split_inclusive('\n').count();
        format!(
            "Last {shown} line{} of job {id} ({}, {state}):\n\n{}",
            if shown == 1 { "" } else { "s" },
            inline_code(job.command(), 60),
            console_block(&text)
        )
    };
    let full_log = job
        .outcome()
        .and_then(|outcome| outcome.status.truncation.clone())
        .and_then(|truncation| truncation.full_output);
    if let Some(path) = full_log {
        answer.push_str(&format!("\n\nThe full output is in `{path}`."));
    }
    answer
}
