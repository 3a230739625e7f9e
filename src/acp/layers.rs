//! TEMPORARY stand-ins for the driver / tool / presentation layers, which are being written by
//! another engineer. The names and shapes follow the agreed contract exactly; when the real
//! layers land on `main`, this file becomes a list of `pub(crate) use` lines and nothing else in
//! `src/acp` changes.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::exec::{Exit, RunOutcome, RunRequest, Session};

#[derive(Debug, Clone)]
pub struct BashCall {
    pub command: String,
    pub description: Option<String>,
    pub cwd: PathBuf,
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct BashResult {
    pub text: String,
    pub outcome: RunOutcome,
}

pub async fn run_bash(
    session: &Session,
    call: &BashCall,
    on_output: &mut (dyn FnMut(&str) + Send),
    cancel: &CancellationToken,
) -> BashResult {
    let outcome = session
        .run(
            RunRequest {
                script: call.command.clone(),
                timeout: call.timeout,
            },
            on_output,
            cancel,
        )
        .await;
    let mut text = outcome.output.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if outcome.status.cancelled {
        text.push_str("[cancelled]\n");
    }
    match outcome.status.exit {
        Exit::Code(code) => text.push_str(&format!("[exit code: {code}]")),
        Exit::Signal(sig) => text.push_str(&format!(
            "[killed by signal: {}]",
            crate::exec::signal_name(sig)
        )),
    }
    BashResult { text, outcome }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverError {
    NoCommand,
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the prompt holds no command: type a bash script to run")
    }
}

impl std::error::Error for DriverError {}

pub fn call_from_prompt(
    prompt_text: &str,
    cwd: PathBuf,
    timeout: Option<Duration>,
) -> Result<BashCall, DriverError> {
    let mut description = None;
    let mut body = prompt_text;
    if let Some(rest) = prompt_text.strip_prefix("# ") {
        let (first, tail) = rest.split_once('\n').unwrap_or((rest, ""));
        description = Some(first.trim().to_string());
        body = tail;
    }
    let command = body.trim_matches('\n').to_string();
    if command.trim().is_empty() {
        return Err(DriverError::NoCommand);
    }
    Ok(BashCall {
        command,
        description,
        cwd,
        timeout,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallView {
    pub title: String,
    pub description: Option<String>,
    pub cwd: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitView {
    pub exit_code: Option<u32>,
    pub signal: Option<String>,
    pub success: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalView {
    pub cwd: PathBuf,
    pub output: String,
    pub exit: ExitView,
    pub status: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultView {
    Terminal {
        terminal: TerminalView,
        console: String,
    },
    Text(String),
}

pub fn present_call(call: &BashCall) -> CallView {
    CallView {
        title: call.command.clone(),
        description: call.description.clone(),
        cwd: call.cwd.clone(),
    }
}

pub fn present_result(call: &BashCall, result_text: &str) -> ResultView {
    let (body, last) = match result_text.rsplit_once('\n') {
        Some((body, last)) => (format!("{body}\n"), last),
        None => (String::new(), result_text),
    };
    let exit = if let Some(code) = last
        .strip_prefix("[exit code: ")
        .and_then(|r| r.strip_suffix(']'))
    {
        let code: u32 = code.parse().unwrap_or(1);
        ExitView {
            exit_code: Some(code),
            signal: None,
            success: code == 0,
        }
    } else if let Some(sig) = last
        .strip_prefix("[killed by signal: ")
        .and_then(|r| r.strip_suffix(']'))
    {
        ExitView {
            exit_code: None,
            signal: Some(sig.to_string()),
            success: false,
        }
    } else {
        return ResultView::Text(result_text.to_string());
    };
    let console = format!("```console\n{result_text}\n```");
    ResultView::Terminal {
        terminal: TerminalView {
            cwd: call.cwd.clone(),
            output: body,
            exit,
            status: vec![last.to_string()],
        },
        console,
    }
}
