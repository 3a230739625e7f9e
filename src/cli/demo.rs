//! `acp-bash demo`: starts acp-bash as a child agent and runs representative commands through it,
//! once as Zed (the live terminal card) and once as a plain client (the console block).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use acp_bash::acp::client::{ClientProfile, Conversation, Turn};
use acp_bash::acp::summary::CallSummary;
use agent_client_protocol::v1::schema::{
    CancelNotification, SessionId, SetSessionModeRequest, StopReason,
};
use agent_client_protocol::LineDirection;

use super::{child_client, describe_error, EngineArgs};

/// One step of a scene of the demo.
enum Step {
    /// A prompt, as typed.
    Prompt(&'static str),
    /// A prompt cancelled (`session/cancel`, an editor's stop button) once it has printed.
    Cancel(&'static str),
    /// `session/set_mode` (the mode picker).
    Mode(&'static str),
}

use Step::{Cancel, Mode, Prompt};

/// The variable the demo's child agent gets, to show the env scrub at work (a fake value).
const DEMO_SECRET: (&str, &str) = ("DEMO_API_TOKEN", "demo-value-not-a-real-token");

/// The demo's scenes: (label, steps run in one session in order).
const DEMO: &[(&str, &[Step])] = &[
    (
        "a command with a description: a first line `# words` describes it",
        &[Prompt("# Say hello\necho \"hello from $(basename \"$0\")\"; uname -s")],
    ),
    ("a command that fails, writing to stderr", &[Prompt("# List a directory that does not exist\nls /nonexistent-acp-bash-demo")]),
    (
        "colours and UTF-8",
        &[Prompt("printf '\\033[32mgreen\\033[0m \\033[1;31mbold red\\033[0m \\033[4munderlined\\033[0m\\n'; echo 'ünïcödé ✓ 日本語 🚀'")],
    ),
    ("a cd that carries over to the next prompt", &[Prompt("mkdir -p demo-dir && cd demo-dir"), Prompt("pwd")]),
    (
        "a slow command streaming lines",
        &[Prompt("# Count slowly\nfor i in 1 2 3 4 5; do echo \"line $i\"; sleep 0.3; done")],
    ),
    (
        "the sandbox refusing a write outside the session folder (workspace mode, picked in the mode picker)",
        &[
            Mode("workspace"),
            Prompt(
                "# Write to the home directory\necho test > \"$HOME/.acp-bash-demo-write\" && \
                 rm -f \"$HOME/.acp-bash-demo-write\" && \
                 echo 'written: workspace mode is not enforced here (see acp-bash doctor)'",
            ),
        ],
    ),
    (
        "a secret in the agent's environment, scrubbed before every command",
        &[Prompt("# Look for the agent's DEMO_API_TOKEN\necho \"DEMO_API_TOKEN=${DEMO_API_TOKEN-(not here: removed by the env scrub)}\"")],
    ),
    (
        "a background job: /bg starts it, /jobs lists it, /kill stops it",
        &[Prompt("/bg sleep 30"), Prompt("/jobs"), Prompt("/kill 1")],
    ),
    (
        "a cancel (the editor's stop button) while a command runs",
        &[Cancel("# Wait a long time\necho started; sleep 30")],
    ),
];

pub async fn demo(engine: &EngineArgs, log_level: Option<&str>) -> ExitCode {
    // This process holds the same environment as the agent it starts (secrets included): as
    // non-dumpable as the agent, so no command of the same user opens its `/proc` files.
    acp_bash::sandbox::protect_agent_process();
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
            "ANY OTHER CLIENT (last lines live, the whole console block in the final update)",
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
    let client = child_client(engine, log_level, profile)?
        .env(DEMO_SECRET.0, DEMO_SECRET.1)
        .on_line(|line, direction| {
            if direction == LineDirection::Stderr {
                eprintln!("{line}");
            }
        });
    let dir: PathBuf = dir.to_path_buf();
    client
        .run(async move |mut conversation: Conversation| {
            for (label, steps) in DEMO {
                println!("── {label} ──");
                let session = conversation.new_session(&dir).await?;
                for step in *steps {
                    match step {
                        Prompt(prompt) => {
                            demo_prompt(&mut conversation, &session, prompt, profile, false).await?
                        }
                        Cancel(prompt) => {
                            demo_prompt(&mut conversation, &session, prompt, profile, true).await?
                        }
                        Mode(mode) => {
                            conversation
                                .connection()
                                .send_request(SetSessionModeRequest::new(
                                    session.clone(),
                                    mode.to_string(),
                                ))
                                .block_task()
                                .await?;
                            println!("  (mode picker: {mode})");
                        }
                    }
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
    cancel: bool,
) -> agent_client_protocol::Result<()> {
    let mut summary = CallSummary::default();
    let card = profile == ClientProfile::Zed;
    let mut at_line_start = true;
    println!("  you type: {}", prompt.replace('\n', "\n            "));
    let connection = conversation.connection().clone();
    let mut cancel_sent = false;
    let turn: Turn = conversation
        .prompt_with(session, prompt, |update| {
            let before = summary.streamed.len();
            let had_title = !summary.title.is_empty();
            let had_messages = summary.messages.len();
            summary.apply(update);
            for message in &summary.messages[had_messages..] {
                println!("{}", indent(&format!("agent: {message}"), "  "));
            }
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
            let printed = !summary.streamed.is_empty()
                || summary.text.iter().any(|t| t.contains("\nstarted\n"));
            if cancel && !cancel_sent && printed {
                // What an editor's stop button sends.
                cancel_sent = true;
                println!("  (you press stop: session/cancel)");
                let _ = connection.send_notification(CancelNotification::new(session.clone()));
            }
        })
        .await?;
    if summary.status.is_none() {
        // A `/bg` job's card: it has not ended when its turn does.
        if !summary.title.is_empty() {
            println!("  └─ (the job keeps running after the turn)");
        }
    } else if card {
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
}
