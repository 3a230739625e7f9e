//! `acp-bash run SCRIPT`: one script through the real protocol, as a client would see it; prints
//! its output and exits with its exit status.

use std::io::Write as _;
use std::process::ExitCode;

use acp_bash::acp::client::{ClientProfile, Conversation};
use acp_bash::acp::summary::CallSummary;
use agent_client_protocol::v1::schema::CancelNotification;
use agent_client_protocol::LineDirection;

use super::{child_client, describe_error, RunArgs};

pub async fn run(log_level: Option<&str>, args: RunArgs) -> ExitCode {
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
