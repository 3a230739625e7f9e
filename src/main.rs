//! The `acp-bash` command line: serve ACP over stdio (the default), show a demo, run one script
//! through the real protocol, print Zed's settings snippet.
//!
//! Owns: argument parsing, logging setup, and the terminal rendering of `demo` and `run`.
//! Everything protocol-related lives in `acp_bash::acp`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use acp_bash::acp::client::{AcpClient, ClientProfile, Conversation, Turn};
use acp_bash::acp::AcpBashAgent;
use acp_bash::exec::{Engine, EngineConfig, Exit, RunStatus};
use acp_bash::sandbox;
use acp_bash::tool::parse_result;
use agent_client_protocol::v1::schema::{
    CancelNotification, SessionId, SessionUpdate, StopReason, ToolCallContent,
};
use agent_client_protocol::LineDirection;
use clap::{Args, Parser, Subcommand};
use serde_json::Value;
use tracing_subscriber::EnvFilter;

/// An ACP agent whose tool is a sandboxed bash: every prompt is a bash script, run by the agent
/// itself and shown as a live terminal card in Zed (a console block in other ACP clients).
///
/// With no command, serves ACP on stdin/stdout: that is how an editor starts it.
#[derive(Parser, Debug)]
#[command(name = "acp-bash", version)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    engine: EngineArgs,
    /// How much the agent logs to stderr: error, warn, info, debug or trace (or any RUST_LOG
    /// filter). Overrides RUST_LOG; the default is warn. Logs never go to stdout.
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve ACP v1 on stdin/stdout (the default). stdout carries only protocol messages.
    Serve,
    /// Start acp-bash as a child agent and run a few representative commands through it, showing
    /// what Zed's terminal card and what other clients' console block display.
    Demo,
    /// Run one script through the real protocol, print its output, exit with its exit status.
    Run(RunArgs),
    /// Print the settings.json snippet that adds this binary to Zed's agents.
    ZedConfig,
    /// Check each sandbox layer on this machine (Landlock, namespaces, private /proc, network
    /// isolation): whether it works here and, if not, why and what to do about it.
    Doctor,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Act as a client without the terminal card (like any non-Zed editor): print the console
    /// block that such a client shows instead of the live output.
    #[arg(long)]
    plain: bool,
    /// Also print every JSON-RPC line exchanged with the agent, to stderr (so that stdout stays
    /// the command's output): `->` client to agent, `<-` agent to client.
    #[arg(long)]
    transcript: bool,
    /// The bash script (several words are joined with spaces). It runs in the current directory.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "SCRIPT"
    )]
    script: Vec<String>,
}

/// How commands run. These apply to `serve`, and to the child agent that `demo` and `run` start.
#[derive(Args, Debug, Clone, Default)]
struct EngineArgs {
    /// How long a command may run before it is killed, e.g. `90s`, `10m`, `1h` (default 10m).
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Pass this variable to commands even though its name or value looks like a secret
    /// (repeatable; the scrub removes tokens, keys and passwords by default).
    #[arg(long = "keep-env", global = true, value_name = "NAME")]
    keep_env: Vec<String>,
    /// Set this variable for every command, after the scrub (repeatable), e.g. `PAGER=cat`.
    #[arg(long = "set-env", global = true, value_name = "NAME=VALUE", value_parser = parse_assignment)]
    set_env: Vec<(String, String)>,
    /// Pass the agent's whole environment to commands, secrets included.
    #[arg(long, global = true)]
    no_env_scrub: bool,
    /// What commands may touch: `workspace` (write only under the session's directory and the
    /// temp dir), `read-only` (write only the temp dir, no network), `full` (no file or network
    /// confinement; background processes still end with the command) or `off` (no kernel
    /// sandbox at all; clients may then choose `off` too).
    #[arg(long, global = true, value_name = "MODE", value_parser = parse_mode)]
    sandbox: Option<sandbox::Mode>,
}

impl EngineArgs {
    fn config(&self) -> EngineConfig {
        let mut config = EngineConfig::default();
        if let Some(timeout) = self.timeout {
            config.default_timeout = timeout;
        }
        config.env.scrub = !self.no_env_scrub;
        config.env.keep = self.keep_env.clone();
        config.env.set = self.set_env.clone();
        if let Some(mode) = self.sandbox {
            config.sandbox_mode = mode;
        }
        config
    }

    /// The same settings as command-line arguments, for a child agent or Zed's settings.
    fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(timeout) = self.timeout {
            args.push("--timeout".into());
            args.push(if timeout.subsec_millis() == 0 {
                format!("{}s", timeout.as_secs())
            } else {
                format!("{}ms", timeout.as_millis())
            });
        }
        for name in &self.keep_env {
            args.push("--keep-env".into());
            args.push(name.clone());
        }
        for (name, value) in &self.set_env {
            args.push("--set-env".into());
            args.push(format!("{name}={value}"));
        }
        if self.no_env_scrub {
            args.push("--no-env-scrub".into());
        }
        if let Some(mode) = self.sandbox {
            args.push("--sandbox".into());
            args.push(mode.id().into());
        }
        args
    }
}

/// Parses `90s`, `10m`, `1h`, `500ms` or a bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: write e.g. 90s, 10m or 1h"))?;
    let seconds = match unit.trim() {
        "" | "s" | "sec" | "secs" => number,
        "ms" => number / 1000.0,
        "m" | "min" | "mins" => number * 60.0,
        "h" => number * 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use ms, s, m or h"
            ))
        }
    };
    if seconds <= 0.0 || !seconds.is_finite() {
        return Err(format!("{text:?}: the timeout must be more than zero"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

fn parse_assignment(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err(format!("{text:?} is not NAME=VALUE")),
    }
}

fn parse_mode(text: &str) -> Result<sandbox::Mode, String> {
    sandbox::Mode::from_id(text).ok_or_else(|| {
        format!("unknown sandbox mode {text:?}: use workspace, read-only, full or off")
    })
}

fn init_logging(level: Option<&str>) {
    let filter = match level {
        Some(level) => EnvFilter::try_new(level).unwrap_or_else(|error| {
            eprintln!("acp-bash: ignoring --log-level {level:?}: {error}");
            EnvFilter::new("warn")
        }),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_level.as_deref());
    // One worker thread (plus the main thread, which only waits): commands run in processes of
    // their own, the agent's work per message and per byte is small, and tasks that wake each
    // other on one thread skip a futex hand-off each time: 0.1–0.9 ms less per command than two
    // workers here, at the same throughput (notes/2026-11-29-runtime-one-worker.md).
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("acp-bash: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => runtime.block_on(serve(&cli.engine)),
        Command::Demo => runtime.block_on(demo(&cli.engine, cli.log_level.as_deref())),
        Command::Run(args) => runtime.block_on(run(&cli.engine, cli.log_level.as_deref(), args)),
        Command::ZedConfig => zed_config(&cli.engine),
        Command::Doctor => {
            print!("{}", sandbox::doctor_report());
            ExitCode::SUCCESS
        }
    };
    // Commands were cancelled and reaped before we got here; don't wait for stray blocking
    // threads (the stdin reader) on the way out.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

/// Serves ACP on stdin/stdout until EOF or a termination signal.
///
/// The connection runs as a task on the runtime's worker, not in `block_on` on the main thread:
/// the protocol's tasks and the commands' tasks then wake each other on one thread, without a
/// hand-off to a parked main thread for every message (0.1–0.2 ms per prompt here).
async fn serve(engine: &EngineArgs) -> ExitCode {
    let engine = engine.clone();
    match tokio::spawn(async move { serve_on_worker(&engine).await }).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("acp-bash: the agent failed: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn serve_on_worker(engine: &EngineArgs) -> ExitCode {
    let agent = AcpBashAgent::new(Engine::new(engine.config()));
    let (signal_tx, mut signal_rx) = tokio::sync::oneshot::channel::<i32>();
    let stop = async move {
        let signal = termination_signal().await;
        tracing::info!(signal, "stopping: cancelling every running command");
        let _ = signal_tx.send(signal);
    };
    match agent
        .serve_until(acp_bash::acp::AgentStdio::new(), stop)
        .await
    {
        // Stopped by a signal: the conventional 128 + its number, once the commands are gone.
        Ok(()) => match signal_rx.try_recv() {
            Ok(signal) => ExitCode::from((128 + signal) as u8),
            Err(_) => ExitCode::SUCCESS,
        },
        Err(error) => {
            tracing::error!(%error, "the connection failed");
            eprintln!("acp-bash: the connection failed: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Waits for SIGTERM, SIGINT or SIGHUP (an editor or a terminal stopping the agent) and returns
/// its number. Without signal support, waits forever.
async fn termination_signal() -> i32 {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => libc::SIGTERM,
        _ = int.recv() => libc::SIGINT,
        _ = hup.recv() => libc::SIGHUP,
    }
}

fn zed_config(engine: &EngineArgs) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => {
            eprintln!("acp-bash: cannot find this binary's path: {error}");
            return ExitCode::FAILURE;
        }
    };
    let snippet = serde_json::json!({
        "agent_servers": {
            "acp-bash": {
                "type": "custom",
                "command": exe.to_string_lossy(),
                "args": engine.to_args(),
                "env": {}
            }
        }
    });
    println!("{}", serde_json::to_string_pretty(&snippet).expect("json"));
    // stdout stays pure JSON (for `acp-bash zed-config > snippet.json`); the hint goes to stderr.
    eprintln!(
        "Merge this into Zed's settings.json (command palette: `zed: open settings`), then pick \
         acp-bash in the agent panel."
    );
    ExitCode::SUCCESS
}

/// A client for a child `acp-bash serve` with the same engine settings as this invocation.
fn child_client(
    engine: &EngineArgs,
    log_level: Option<&str>,
    profile: ClientProfile,
) -> Result<AcpClient, String> {
    let exe = std::env::current_exe()
        .map_err(|error| format!("cannot find this binary's path: {error}"))?;
    let mut args = vec!["serve".to_string()];
    args.extend(engine.to_args());
    if let Some(level) = log_level {
        args.push("--log-level".into());
        args.push(level.into());
    }
    Ok(AcpClient::new(exe, args).profile(profile))
}

/// What a finished call said about its exit, read from the wire as a client would.
#[derive(Debug, Default, Clone)]
struct CallSummary {
    title: String,
    cwd: Option<String>,
    description: Option<String>,
    streamed: String,
    status: Option<String>,
    exit_code: Option<i64>,
    signal: Option<String>,
    text: Vec<String>,
}

impl CallSummary {
    fn apply(&mut self, update: &SessionUpdate) {
        match update {
            SessionUpdate::ToolCall(call) => {
                self.title = call.title.clone();
                self.cwd = meta_str(call.meta.as_ref(), "terminal_info", "cwd");
                self.description = call.content.iter().find_map(content_text);
            }
            SessionUpdate::ToolCallUpdate(update) => {
                if let Some(data) = meta_str(update.meta.as_ref(), "terminal_output", "data") {
                    self.streamed.push_str(&data);
                }
                if let Some(exit) = update.meta.as_ref().and_then(|m| m.get("terminal_exit")) {
                    self.exit_code = exit.get("exit_code").and_then(Value::as_i64);
                    self.signal = exit
                        .get("signal")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                }
                if let Some(status) = update.fields.status {
                    self.status = serde_json::to_value(status)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string));
                }
                if let Some(content) = &update.fields.content {
                    self.text = content.iter().filter_map(content_text).collect();
                }
            }
            _ => {}
        }
    }

    /// The exit status for `acp-bash run`: the card's exit, else the console block's marker.
    fn exit_status(&self) -> u8 {
        if let Some(code) = self.exit_code {
            return code.clamp(0, 255) as u8;
        }
        if let Some(signal) = &self.signal {
            return acp_bash::exec::signal_number(signal)
                .map_or(1, |n| (128 + n).clamp(0, 255) as u8);
        }
        // The plain path: read the console block's status line with the markers' own parser.
        let status = self
            .text
            .last()
            .and_then(|block| status_from_console(block));
        match status.map(|status| status.exit) {
            Some(Exit::Code(code)) => code.clamp(0, 255) as u8,
            Some(Exit::Signal(signal)) => (128 + signal).clamp(0, 255) as u8,
            None if self.status.as_deref() == Some("completed") => 0,
            None => 1,
        }
    }
}

/// The status line of a ```` ```console ```` block (fence lines removed, then the markers parsed).
fn status_from_console(block: &str) -> Option<RunStatus> {
    let (_fence, rest) = block.split_once('\n')?;
    let (result_text, _fence) = rest.rsplit_once('\n')?;
    parse_result(result_text).ok().map(|(_, status)| status)
}

fn meta_str(
    meta: Option<&serde_json::Map<String, Value>>,
    key: &str,
    field: &str,
) -> Option<String> {
    meta?.get(key)?.get(field)?.as_str().map(str::to_string)
}

fn content_text(content: &ToolCallContent) -> Option<String> {
    match content {
        ToolCallContent::Content(content) => match &content.content {
            agent_client_protocol::v1::schema::ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        },
        _ => None,
    }
}

async fn run(engine: &EngineArgs, log_level: Option<&str>, args: RunArgs) -> ExitCode {
    let script = args.script.join(" ");
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(error) => {
            eprintln!("acp-bash: cannot read the current directory: {error}");
            return ExitCode::FAILURE;
        }
    };
    let profile = if args.plain {
        ClientProfile::Plain
    } else {
        ClientProfile::Zed
    };
    let mut client = match child_client(engine, log_level, profile) {
        Ok(client) => client,
        Err(error) => {
            eprintln!("acp-bash: {error}");
            return ExitCode::FAILURE;
        }
    };
    let show_transcript = args.transcript;
    client = client.on_line(move |line, direction| match direction {
        LineDirection::Stdin if show_transcript => eprintln!("-> {line}"),
        LineDirection::Stdout if show_transcript => eprintln!("<- {line}"),
        LineDirection::Stderr => eprintln!("{line}"),
        _ => {}
    });
    let plain = args.plain;
    let result = client
        .run(async move |mut conversation: Conversation| {
            let session = conversation.new_session(&cwd).await?;
            let mut summary = CallSummary::default();
            let mut stdout = std::io::stdout();
            // Ctrl-C cancels the command through the protocol (session/cancel), like an editor's
            // stop button, and `run` still reports how it ended.
            let connection = conversation.connection().clone();
            let cancelled_by_ctrl_c = {
                let session = session.clone();
                async move {
                    if tokio::signal::ctrl_c().await.is_ok() {
                        let _ = connection.send_notification(CancelNotification::new(session));
                    }
                    std::future::pending::<()>().await
                }
            };
            let turn = tokio::select! {
                turn = conversation.prompt_with(&session, &script, |update| {
                    let before = summary.streamed.len();
                    summary.apply(update);
                    if !plain {
                        let _ = stdout.write_all(&summary.streamed.as_bytes()[before..]);
                        let _ = stdout.flush();
                    }
                }) => turn?,
                () = cancelled_by_ctrl_c => unreachable!("never completes"),
            };
            if plain {
                for text in &summary.text {
                    println!("{text}");
                }
            }
            Ok((turn.stop_reason, summary))
        })
        .await;
    match result {
        Ok((_, summary)) => ExitCode::from(summary.exit_status()),
        Err(error) => {
            eprintln!("acp-bash: {}", describe_error(&error));
            ExitCode::FAILURE
        }
    }
}

fn describe_error(error: &agent_client_protocol::Error) -> String {
    match &error.data {
        Some(data) => format!("{} ({data})", error.message),
        None => error.message.clone(),
    }
}

/// The demo's scripts: (label, prompts run in one session in order).
const DEMO: &[(&str, &[&str])] = &[
    ("a command that succeeds", &["# Say hello\necho \"hello from $(basename \"$0\")\"; uname -s"]),
    ("a command that fails, writing to stderr", &["# List a directory that does not exist\nls /nonexistent-acp-bash-demo"]),
    (
        "colours and UTF-8",
        &["printf '\\033[32mgreen\\033[0m \\033[1;31mbold red\\033[0m \\033[4munderlined\\033[0m\\n'; echo 'ünïcödé ✓ 日本語 🚀'"],
    ),
    ("a cd that carries over to the next prompt", &["mkdir -p demo-dir && cd demo-dir", "pwd"]),
    (
        "a slow command streaming lines",
        &["# Count slowly\nfor i in 1 2 3 4 5; do echo \"line $i\"; sleep 0.3; done"],
    ),
];

async fn demo(engine: &EngineArgs, log_level: Option<&str>) -> ExitCode {
    let dir = std::env::temp_dir().join(format!("acp-bash-demo-{}", std::process::id()));
    if let Err(error) = std::fs::create_dir_all(&dir) {
        eprintln!("acp-bash: cannot create {}: {error}", dir.display());
        return ExitCode::FAILURE;
    }
    let dir = dir.canonicalize().unwrap_or(dir);
    println!("acp-bash demo: acp-bash runs as a child agent; this process is the ACP client.");
    println!("Every script runs twice: once for a client with Zed's terminal card, once for a plain client.");
    println!("Working directory: {}\n", dir.display());
    let mut code = ExitCode::SUCCESS;
    for (profile, heading) in [
        (
            ClientProfile::Zed,
            "ZED (terminal card: output streamed live, status + exit at the end)",
        ),
        (
            ClientProfile::Plain,
            "ANY OTHER CLIENT (console block in the final update)",
        ),
    ] {
        println!("══════ {heading} ══════\n");
        if let Err(error) = demo_client(engine, log_level, profile, &dir).await {
            eprintln!("acp-bash: the demo failed: {error}");
            code = ExitCode::FAILURE;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    code
}

async fn demo_client(
    engine: &EngineArgs,
    log_level: Option<&str>,
    profile: ClientProfile,
    dir: &Path,
) -> Result<(), String> {
    let client = child_client(engine, log_level, profile)?.on_line(|line, direction| {
        if direction == LineDirection::Stderr {
            eprintln!("{line}");
        }
    });
    let dir: PathBuf = dir.to_path_buf();
    client
        .run(async move |mut conversation: Conversation| {
            for (label, prompts) in DEMO {
                println!("── {label} ──");
                let session = conversation.new_session(&dir).await?;
                for prompt in *prompts {
                    demo_prompt(&mut conversation, &session, prompt, profile).await?;
                }
            }
            Ok(())
        })
        .await
        .map_err(|error| describe_error(&error))
}

async fn demo_prompt(
    conversation: &mut Conversation,
    session: &SessionId,
    prompt: &str,
    profile: ClientProfile,
) -> agent_client_protocol::Result<()> {
    let mut summary = CallSummary::default();
    let card = profile == ClientProfile::Zed;
    let mut at_line_start = true;
    let turn: Turn = conversation
        .prompt_with(session, prompt, |update| {
            let before = summary.streamed.len();
            let had_title = !summary.title.is_empty();
            summary.apply(update);
            if !had_title && !summary.title.is_empty() {
                if let Some(description) = &summary.description {
                    println!("  {description}");
                }
                if card {
                    println!(
                        "  ┌─ $ {}   [cwd {}]",
                        summary.title.replace('\n', "\n  │   "),
                        summary.cwd.as_deref().unwrap_or("?")
                    );
                } else {
                    println!(
                        "  tool call: $ {}",
                        summary.title.replace('\n', "\n             ")
                    );
                }
            }
            let fresh = &summary.streamed[before..];
            if card && !fresh.is_empty() {
                print!("{}", indent_stream(fresh, "  │ ", &mut at_line_start));
                let _ = std::io::stdout().flush();
            }
        })
        .await?;
    if card {
        if !at_line_start {
            println!();
        }
        let exit = match (&summary.exit_code, &summary.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(signal)) => format!("killed by {signal}"),
            _ => "no exit".into(),
        };
        println!("  └─ {} ({exit})", summary.status.as_deref().unwrap_or("?"));
    } else {
        for text in &summary.text {
            if Some(text) == summary.description.as_ref() {
                continue;
            }
            println!("{}", indent(text, "  "));
        }
        println!("  status: {}", summary.status.as_deref().unwrap_or("?"));
    }
    if turn.stop_reason != StopReason::EndTurn {
        println!("  (stop reason: {:?})", turn.stop_reason);
    }
    println!();
    Ok(())
}

/// Prefixes every line of `text`.
fn indent(text: &str, prefix: &str) -> String {
    let mut at_line_start = true;
    indent_stream(text, prefix, &mut at_line_start)
}

/// Prefixes every line of a piece of a stream: pieces may start or end mid-line, so whether the
/// next piece starts a line is carried in `at_line_start`.
fn indent_stream(text: &str, prefix: &str, at_line_start: &mut bool) -> String {
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        if *at_line_start {
            out.push_str(prefix);
        }
        out.push_str(line);
        *at_line_start = line.ends_with('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_pieces_are_indented_once_per_line() {
        let mut at_line_start = true;
        let pieces =
            ["li", "ne 1\nline", " 2\n", "3"].map(|p| indent_stream(p, "| ", &mut at_line_start));
        assert_eq!(pieces.concat(), "| line 1\n| line 2\n| 3");
        assert!(!at_line_start);
    }

    #[test]
    fn the_exit_status_of_a_console_block_comes_from_its_markers() {
        let summary = |block: &str| CallSummary {
            text: vec![block.to_string()],
            status: Some("failed".into()),
            ..CallSummary::default()
        };
        assert_eq!(
            summary("```console\nhi\n[exit code: 3]\n```").exit_status(),
            3
        );
        assert_eq!(
            summary("```console\n[cancelled] [killed by signal: SIGTERM]\n```").exit_status(),
            143
        );
        assert_eq!(
            summary("````console\n```\n[exit code: 0]\n````").exit_status(),
            0
        );
        assert_eq!(summary("not a console block").exit_status(), 1);
    }

    #[test]
    fn durations_read_like_people_write_them() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5y").is_err());
        assert!(parse_duration("0s").is_err());
    }

    #[test]
    fn engine_flags_round_trip_through_child_arguments() {
        let cli = Cli::try_parse_from([
            "acp-bash",
            "--timeout",
            "90s",
            "--keep-env",
            "GH_TOKEN",
            "--set-env",
            "PAGER=cat",
            "--no-env-scrub",
            "--sandbox",
            "read-only",
            "serve",
        ])
        .unwrap();
        let again = Cli::try_parse_from(
            std::iter::once("acp-bash".to_string()).chain(cli.engine.to_args()),
        )
        .unwrap();
        let (a, b) = (cli.engine.config(), again.engine.config());
        assert_eq!(a.default_timeout, b.default_timeout);
        assert_eq!(a.env.keep, b.env.keep);
        assert_eq!(a.env.set, b.env.set);
        assert_eq!(a.env.scrub, b.env.scrub);
        assert_eq!(a.sandbox_mode, b.sandbox_mode);
        assert!(!a.env.scrub);
        assert_eq!(a.sandbox_mode, sandbox::Mode::ReadOnly);
    }

    #[test]
    fn run_takes_the_script_after_a_double_dash() {
        let cli =
            Cli::try_parse_from(["acp-bash", "run", "--plain", "--", "echo", "-n", "hi"]).unwrap();
        match cli.command {
            Some(Command::Run(args)) => {
                assert!(args.plain);
                assert_eq!(args.script.join(" "), "echo -n hi");
            }
            other => panic!("{other:?}"),
        }
    }
}
