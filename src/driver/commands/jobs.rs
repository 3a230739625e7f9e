//! `/jobs`: lists the session's jobs: id, pid, state, elapsed time, command.

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{human_duration, Command, CommandHost, CommandSpec, Run};
use crate::jobs::JobRegistry;
use crate::present::console_block;

/// `/jobs`.
pub const COMMAND: Command = Command::new(SPEC, parse);

/// What the agent advertises about `/jobs`.
pub const SPEC: CommandSpec = CommandSpec {
    name: "jobs",
    description: "List this session's background jobs: id, pid, state, elapsed time, command",
    hint: "no arguments",
    usage: "/jobs",
};

/// `/jobs` (no arguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Jobs;

fn parse(args: &str) -> Result<Box<dyn Run>, String> {
    if !args.is_empty() {
        return Err(format!("/jobs takes no arguments, got {args:?}"));
    }
    Ok(Box::new(Jobs))
}

impl Run for Jobs {
    fn run<'a>(self: Box<Self>, host: &'a dyn CommandHost) -> BoxFuture<'a, String> {
        futures::future::ready(answer(host.jobs())).boxed()
    }
}

/// How long a command may be in the listing before it is cut.
const COMMAND_WIDTH: usize = 60;

/// The listing, as a fixed-width table in a text block.
pub fn answer(registry: &JobRegistry) -> String {
    let jobs = registry.list();
    if jobs.is_empty() {
        return "No background jobs in this session. Start one with `/bg SCRIPT`.".into();
    }
    let mut rows = vec![[
        "ID".to_string(),
        "PID".to_string(),
        "STATE".to_string(),
        "ELAPSED".to_string(),
        "COMMAND".to_string(),
    ]];
    for job in &jobs {
        let command = job.command().trim();
        let first = command.lines().next().unwrap_or("");
        let mut shown: String = first.chars().take(COMMAND_WIDTH).collect();
        if shown.len() < command.len() {
            shown.push('…');
        }
        rows.push([
            job.id().to_string(),
            job.pid().map_or("-".to_string(), |pid| pid.to_string()),
            job.state().to_string(),
            human_duration(job.elapsed()),
            shown,
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let table: String = rows
        .iter()
        .map(|row| {
            let mut line = String::new();
            for (cell, width) in row[..4].iter().zip(&widths) {
                line.push_str(&format!("{cell:<width$}  "));
            }
            line.push_str(&row[4]);
            line.push('\n');
            line
        })
        .collect();
    let running = registry.running();
    format!(
        "{} of this session ({running} running):\n\n{}",
        if jobs.len() == 1 {
            "1 job".to_string()
        } else {
            format!("{} jobs", jobs.len())
        },
        console_block(&table).replacen("console", "text", 1)
    )
}
