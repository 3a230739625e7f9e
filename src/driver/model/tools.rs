//! The tools a model is given, and running one of its calls through the turn.
//!
//! Owns the three tools' definitions (`bash`, with `background` to start a job; `job_output`;
//! `job_kill`, on the session's [`crate::jobs::JobRegistry`]) and [`run_tool_call`]: parse the
//! arguments, run the call through the [`TurnHost`] (a card or console block like a typed
//! command; a `/bg` or `/kill` card for jobs), and answer with the text the model reads. Bad
//! arguments run nothing; the answer says what to fix. Must not touch: HTTP, ACP.

use serde_json::{json, Value};

use super::api::{ToolCall, ToolSpec};
use crate::driver::commands::{bg, kill, SlashCommand};
use crate::driver::TurnHost;
use crate::jobs::{JobId, JobState};
use crate::present::model::model_text;
use crate::tool::{BashArgs, ToolDefinition};

/// The `job_output` tool's name.
pub const JOB_OUTPUT: &str = "job_output";
/// The `job_kill` tool's name.
pub const JOB_KILL: &str = "job_kill";

/// The tools, as the model sees them.
pub fn specs() -> Vec<ToolSpec> {
    let bash = ToolDefinition::bash();
    let mut parameters = bash.input_schema;
    parameters["properties"]["background"] = json!({
        "type": "boolean",
        "description": "Start the command as a background job and return at once with its \
                        job id (for servers and watchers). Read its output with job_output, \
                        stop it with job_kill."
    });
    let job_id = json!({"type": "integer", "minimum": 1, "description": "The job's id."});
    vec![
        ToolSpec {
            name: bash.name,
            description: format!(
                "{} Set `background: true` for a command that keeps running.",
                bash.description
            ),
            parameters,
        },
        ToolSpec {
            name: JOB_OUTPUT.into(),
            description: "The state of a background job and the last lines of its output.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "id": job_id,
                    "lines": {"type": "integer", "minimum": 1,
                              "description": "How many of the last lines (default 50)."}
                },
                "required": ["id"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: JOB_KILL.into(),
            description: "Kill a background job and everything it started.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"id": job_id},
                "required": ["id"],
                "additionalProperties": false
            }),
        },
    ]
}

/// What a call answered: the text for the model, and whether the call failed to run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolAnswer {
    /// The result text.
    pub content: String,
    /// Bad arguments or an unknown tool: nothing ran.
    pub is_error: bool,
}

impl ToolAnswer {
    fn ok(content: String) -> Self {
        ToolAnswer {
            content,
            is_error: false,
        }
    }

    fn error(content: String) -> Self {
        ToolAnswer {
            content,
            is_error: true,
        }
    }
}

/// Runs the model's `call` through `turn`; `budget` bounds the output the model reads.
pub async fn run_tool_call(turn: &mut dyn TurnHost, call: &ToolCall, budget: usize) -> ToolAnswer {
    let arguments = if call.arguments.trim().is_empty() {
        "{}"
    } else {
        call.arguments.as_str()
    };
    let value: Value = match serde_json::from_str(arguments) {
        Ok(value) => value,
        Err(error) => {
            return ToolAnswer::error(format!(
                "Nothing ran: the arguments of `{}` are not JSON ({error}). Send one JSON \
                 object: {}. (Arguments cut off by the reply's token limit are not JSON: \
                 write a long file in several smaller steps.)",
                call.name,
                expected_fields(&call.name)
            ))
        }
    };
    match call.name.as_str() {
        "bash" => bash(turn, value, budget).await,
        JOB_OUTPUT => match job_args(&value, true) {
            Ok((id, lines)) => ToolAnswer::ok(job_output(turn, id, lines, budget)),
            Err(problem) => ToolAnswer::error(problem),
        },
        JOB_KILL => match job_args(&value, false) {
            Ok((id, _)) => ToolAnswer::ok(
                turn.run_command(SlashCommand::new(&kill::COMMAND, kill::Kill::new(id)))
                    .await,
            ),
            Err(problem) => ToolAnswer::error(problem),
        },
        other if other.starts_with(super::mcp_tools::PREFIX) => {
            super::mcp_tools::run(turn, other, value).await
        }
        other => ToolAnswer::error(format!(
            "Nothing ran: there is no tool `{other}`. The tools are `bash`, `{JOB_OUTPUT}` and \
             `{JOB_KILL}`."
        )),
    }
}

/// The fields tool `name` takes, for an answer to arguments that are not JSON.
fn expected_fields(name: &str) -> &'static str {
    match name {
        JOB_OUTPUT => "{\"id\": positive integer, \"lines\"?: positive integer}",
        JOB_KILL => "{\"id\": positive integer}",
        _ => {
            "{\"command\": string, \"description\"?: string, \"timeout_ms\"?: positive \
             integer, \"background\"?: boolean}"
        }
    }
}

async fn bash(turn: &mut dyn TurnHost, mut value: Value, budget: usize) -> ToolAnswer {
    let background = match value.as_object_mut().and_then(|o| o.remove("background")) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(background)) => background,
        Some(other) => {
            return ToolAnswer::error(format!(
                "Nothing ran: `background` must be true or false, got {other}."
            ))
        }
    };
    let args = match BashArgs::from_value(value) {
        Ok(args) => args,
        Err(error) => {
            return ToolAnswer::error(format!(
                "Nothing ran: {error} (and \"background\"?: boolean)."
            ))
        }
    };
    if background {
        let script = args.command;
        return ToolAnswer::ok(
            turn.run_command(SlashCommand::new(&bg::COMMAND, bg::Bg::new(script)))
                .await,
        );
    }
    let result = turn.run_bash(args.into_call()).await;
    ToolAnswer::ok(model_text(&result, budget))
}

/// `(id, lines)` of a job tool's arguments.
fn job_args(value: &Value, with_lines: bool) -> Result<(JobId, usize), String> {
    let expected = if with_lines {
        "expected {\"id\": positive integer, \"lines\"?: positive integer}"
    } else {
        "expected {\"id\": positive integer}"
    };
    let Some(object) = value.as_object() else {
        return Err(format!(
            "Nothing ran: the arguments must be an object; {expected}."
        ));
    };
    let allowed: &[&str] = if with_lines {
        &["id", "lines"]
    } else {
        &["id"]
    };
    if let Some(unknown) = object.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "Nothing ran: unknown field `{unknown}`; {expected}."
        ));
    }
    let id = match &object.get("id") {
        Some(Value::Number(n)) => n.as_u64().filter(|n| *n > 0).map(JobId),
        Some(Value::String(s)) => s.parse().ok(),
        _ => None,
    };
    let Some(id) = id else {
        return Err(format!(
            "Nothing ran: `id` is missing or not a job id; {expected}."
        ));
    };
    let lines = match object.get("lines") {
        None => 50,
        Some(value) => match value.as_u64().filter(|n| *n > 0) {
            Some(n) => n as usize,
            None => {
                return Err(format!(
                    "Nothing ran: `lines` must be positive; {expected}."
                ))
            }
        },
    };
    Ok((id, lines))
}

fn job_output(turn: &mut dyn TurnHost, id: JobId, lines: usize, budget: usize) -> String {
    let Some(job) = turn.jobs().get(id) else {
        let known: Vec<String> = turn
            .jobs()
            .list()
            .iter()
            .map(|j| j.id().to_string())
            .collect();
        return format!(
            "There is no job {id} in this session (jobs: {}).",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        );
    };
    let state = match job.state() {
        JobState::Running => "running".to_string(),
        ended => ended.to_string(),
    };
    let mut output = job.last_lines(lines);
    if output.len() > budget {
        let mut cut = output.len() - budget;
        while !output.is_char_boundary(cut) {
            cut += 1;
        }
        output = format!("[… earlier output left out …]\n{}", &output[cut..]);
    }
    format!("job {id} `{}`: {state}\n{output}", job.command())
}
