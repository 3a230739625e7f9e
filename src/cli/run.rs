//! `acp-bash run SCRIPT`: one prompt through the real protocol, showing on stdout what a client
//! would: the agent's messages (a slash command's answer, the nothing-to-run hint), and the call's
//! output as Zed's card streams it, or with `--plain` the live console view while the command
//! runs and then the console block. acp-bash's own notices about the run go to stderr (on the
//! card's path; `--plain`'s console block shows them as a plain client would). Exits with the
//! command's exit status (0 after a message-only turn such as `/help`).

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;

use acp_bash::acp::client::{ClientProfile, Conversation};
use acp_bash::acp::summary::CallSummary;
use agent_client_protocol::v1::schema::{CancelNotification, SessionUpdate, StopReason};
use agent_client_protocol::LineDirection;

use super::{child_client, describe_error, RunArgs};

pub async fn run(log_level: Option<&str>, args: RunArgs) -> ExitCode {
    // This process holds the same environment as the agent it starts (secrets included): as
    // non-dumpable as the agent, so no command of the same user opens its `/proc` files.
    acp_bash::sandbox::protect_agent_process();
    let engine = &args.engine;
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
    // acp-bash's own notices about the run (what its mode does not enforce here, …) go to
    // stderr, apart from the command's output on stdout.
    client = client
        .notices_apart()
        .on_line(move |line, direction| match direction {
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
            let mut screen = Screen::new(std::io::stdout().is_terminal());
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
                    let notices_before = summary.notices.len();
                    summary.apply(update);
                    for notice in &summary.notices[notices_before..] {
                        screen.notice(notice);
                    }
                    match update {
                        SessionUpdate::AgentMessageChunk(_) => {
                            if let Some(message) = summary.messages.last() {
                                screen.message(message);
                            }
                        }
                        // A plain client's live view: an update with content and no status.
                        SessionUpdate::ToolCallUpdate(call)
                            if plain
                                && call.fields.content.is_some()
                                && call.fields.status.is_none() =>
                        {
                            screen.live(&summary.text.join("\n"));
                        }
                        _ => {
                            if !plain {
                                screen.stream(&summary.streamed[before..]);
                            }
                        }
                    }
                }) => turn?,
                () = cancelled_by_ctrl_c => unreachable!("never completes"),
            };
            if plain && summary.status.is_some() {
                screen.last(&summary.text.join("\n"));
            }
            screen.finish();
            Ok((turn.stop_reason, summary))
        })
        .await;
    match result {
        Ok((stop_reason, summary)) => ExitCode::from(exit_status(stop_reason, &summary)),
        Err(error) => {
            eprintln!("acp-bash: {}", describe_error(&error));
            ExitCode::FAILURE
        }
    }
}

/// The call's exit status when the turn ended a call; 0 when the turn only answered (a slash
/// command, the nothing-to-run hint: like `bash -c ''`), 1 otherwise. A `/bg` job's card has
/// not ended when its turn does, so `run -- /bg …` is a message-only turn too; its job ends
/// with `run`'s child agent, which `run` says on stderr.
fn exit_status(stop_reason: StopReason, summary: &CallSummary) -> u8 {
    if summary.status.is_some() {
        return summary.exit_status();
    }
    if !summary.title.is_empty() {
        eprintln!(
            "acp-bash run: the background job ends with this run (`run` keeps no agent \
             running); in an editor it keeps running after its turn."
        );
    }
    match stop_reason {
        StopReason::EndTurn if !summary.messages.is_empty() => 0,
        _ => 1,
    }
}

/// What `run` prints on stdout, keeping lines whole: the card's stream as it comes, agent
/// messages on lines of their own, and a plain client's live view (on a terminal redrawn in
/// place; otherwise each view printed whole as it comes, as a log of what the client showed).
struct Screen {
    out: std::io::Stdout,
    terminal: bool,
    at_line_start: bool,
    /// How many lines the live view on the terminal takes (to redraw it).
    live_lines: usize,
}

impl Screen {
    fn new(terminal: bool) -> Self {
        Screen {
            out: std::io::stdout(),
            terminal,
            at_line_start: true,
            live_lines: 0,
        }
    }

    fn write(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
        self.at_line_start = text.ends_with('\n');
    }

    /// acp-bash's notice about the run: on stderr, as the card would show it, so that stdout
    /// carries the command's bytes only.
    fn notice(&mut self, text: &str) {
        let _ = self.out.flush();
        eprint!("{}", acp_bash::exec::drain::notice_line(text));
    }

    fn line_start(&mut self) {
        if !self.at_line_start {
            self.write("\n");
        }
    }

    fn stream(&mut self, data: &str) {
        self.write(data);
    }

    fn message(&mut self, text: &str) {
        self.clear_live();
        self.line_start();
        self.write(text);
        self.line_start();
    }

    fn clear_live(&mut self) {
        if self.terminal && self.live_lines > 0 {
            // Up to the live view's first line, then clear to the end of the screen.
            self.write(&format!("\x1b[{}F\x1b[J", self.live_lines));
            // The cursor is at the start of the view's first line again.
            self.at_line_start = true;
            self.live_lines = 0;
        }
    }

    fn live(&mut self, view: &str) {
        self.clear_live();
        self.line_start();
        self.write(view);
        self.line_start();
        if self.terminal {
            self.live_lines = view.lines().count().max(1);
        }
    }

    /// The final view: replaces the live one on a terminal.
    fn last(&mut self, view: &str) {
        self.clear_live();
        self.line_start();
        self.write(view);
        self.line_start();
    }

    fn finish(&mut self) {
        if !self.terminal {
            return;
        }
        // A card stream that did not end its line: end it, so that the shell's prompt starts
        // on a line of its own (on a pipe the bytes stay exactly the command's).
        self.line_start();
    }
}
