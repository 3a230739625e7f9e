//! Background jobs and slash commands over real pipes: `/bg` streams to its card after the turn
//! that started it, `/kill` stops a job's whole tree, the job limit, sessions' jobs are
//! independent, foreground commands run beside jobs, bad arguments get a message, and only the
//! advertised `/NAME`s are commands.

use acp_bash::acp::client::{AcpClient, ClientProfile, Conversation};
use agent_client_protocol::v1::schema::{
    ContentBlock, SessionId, SessionUpdate, StopReason, ToolCallStatus, ToolKind,
};

use crate::support::acp::*;

/// The agent's messages in `updates`, joined.
pub fn message(updates: &[SessionUpdate]) -> String {
    updates
        .iter()
        .filter_map(|update| match update {
            SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                ContentBlock::Text(text) => Some(text.text.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Reads `session`'s updates (after a turn has ended) until `done` holds for them.
pub async fn updates_until(
    c: &mut Conversation,
    session: &SessionId,
    done: impl Fn(&[SessionUpdate]) -> bool,
) -> Vec<SessionUpdate> {
    let mut updates = Vec::new();
    guard("waiting for a job's updates", async {
        while !done(&updates) {
            let notification = c.next_update().await.expect("an update");
            if &notification.session_id == session {
                updates.push(notification.update);
            }
        }
    })
    .await;
    updates
}

/// Whether the updates hold a final update (a status).
pub fn has_final(updates: &[SessionUpdate]) -> bool {
    tool_call_updates(updates)
        .iter()
        .any(|u| u.fields.status.is_some())
}

/// The pid the `/bg` message names.
pub fn named_pid(message: &str) -> i32 {
    let rest = message
        .split_once("(pid ")
        .unwrap_or_else(|| panic!("the message names the pid: {message}"))
        .1;
    rest[..rest.find(')').unwrap()].parse().unwrap()
}

/// A client with extra agent flags (still `--sandbox full`, like [`client`]).
fn client_with(profile: ClientProfile, flags: &[&str]) -> AcpClient {
    let mut args = vec![
        "serve",
        "--sandbox",
        "full",
        "--log-level",
        "acp_bash=debug",
    ];
    args.extend_from_slice(flags);
    AcpClient::new(binary(), args).profile(profile)
}

async fn run_with<R>(
    client: AcpClient,
    what: &str,
    conversation: impl AsyncFnOnce(Conversation) -> agent_client_protocol::Result<R>,
) -> R {
    converse_with(client, what, conversation).await.0
}

/// A prompt that must end with `end_turn`.
async fn ask(c: &mut Conversation, session: &SessionId, text: &str) -> Vec<SessionUpdate> {
    let turn = c.prompt(session, text).await.unwrap();
    assert_eq!(turn.stop_reason, StopReason::EndTurn, "{text}");
    turn.updates
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_are_advertised_right_after_session_new() {
    let (_tmp, dir) = temp_dir();
    let updates = converse(ClientProfile::Zed, "commands", async |mut c| {
        let session = c.new_session(&dir).await?;
        Ok(updates_until(&mut c, &session, |u| !u.is_empty()).await)
    })
    .await;
    let SessionUpdate::AvailableCommandsUpdate(advertised) = &updates[0] else {
        panic!("the first update is available_commands_update: {updates:?}");
    };
    let names: Vec<&str> = advertised
        .available_commands
        .iter()
        .map(|command| command.name.as_str())
        .collect();
    // Exactly the registered commands, in their order (a new one is its file plus one line).
    let registered: Vec<&str> = acp_bash::driver::commands::COMMANDS
        .iter()
        .map(|command| command.spec.name)
        .collect();
    assert_eq!(names, registered);
    assert_eq!(&names[..4], ["bg", "jobs", "kill", "logs"]);
    assert_eq!(names.last(), Some(&"help"));
    for command in &advertised.available_commands {
        assert!(!command.description.is_empty(), "{command:?}");
        let input = serde_json::to_value(&command.input).unwrap();
        assert!(
            input["hint"].as_str().is_some_and(|hint| !hint.is_empty()),
            "{command:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_advertised_names_are_commands_and_bad_arguments_get_a_message() {
    let (_tmp, dir) = temp_dir();
    converse(ClientProfile::Plain, "slash detection", async |mut c| {
        let session = c.new_session(&dir).await?;
        // A path that starts with / is bash.
        let updates = ask(&mut c, &session, "/usr/bin/env echo hi").await;
        assert!(console_block(&updates).contains("hi\n[exit code: 0]"));
        assert_eq!(message(&updates), "");

        for (prompt, says) in [
            ("/kill", "which job?"),
            ("/kill 1", "There is no job 1"),
            ("/kill x", "\"x\" is not a job id"),
            ("/logs 1 many", "\"many\" is not a line count"),
            ("/bg", "give the script to run"),
            ("/jobs now", "/jobs takes no arguments"),
            ("/jobs", "No background jobs in this session"),
            ("/help nope", "there is no command \"nope\""),
        ] {
            let updates = ask(&mut c, &session, prompt).await;
            let said = message(&updates);
            assert!(said.contains(says), "{prompt}: {said}");
            assert!(
                !updates
                    .iter()
                    .any(|u| matches!(u, SessionUpdate::ToolCall(_))),
                "{prompt} runs nothing"
            );
        }
        let help = message(&ask(&mut c, &session, "/help").await);
        for usage in ["/bg SCRIPT", "/jobs", "/kill ID", "/logs ID [N]", "/help"] {
            assert!(help.contains(usage), "{help}");
        }
        assert!(help.contains("Every prompt is a bash script"), "{help}");
        Ok(())
    })
    .await;
}

/// The job waits for a file the test creates after the turn has ended, then prints every
/// 100 ms: each line reaches the card after the turn, and the final update comes at its exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_streams_to_its_card_after_the_turn_and_ends_with_its_status() {
    let (_tmp, dir) = temp_dir();
    let script = "until [ -e go ]; do sleep 0.01; done; \
                  for i in 1 2 3 4 5; do echo tick $i; sleep 0.1; done; exit 3";
    let (turn, after) = converse(ClientProfile::Zed, "streaming job", async |mut c| {
        let session = c.new_session(&dir).await?;
        let turn = ask(&mut c, &session, &format!("/bg {script}")).await;
        let pid = named_pid(&message(&turn));
        assert!(process_alive(pid), "the pid named is the job's shell");
        std::fs::write(dir.join("go"), "").unwrap();
        let after = updates_until(&mut c, &session, has_final).await;
        Ok((turn, after))
    })
    .await;

    let call = tool_call(&turn);
    assert_eq!(call.kind, ToolKind::Execute);
    assert_eq!(call.title, script);
    assert_eq!(call.status, ToolCallStatus::InProgress);
    let info = &call.meta.as_ref().expect("_meta")["terminal_info"];
    assert_eq!(info["cwd"], dir.to_str().unwrap());
    let said = message(&turn);
    assert!(said.starts_with("Started job 1 (pid "), "{said}");
    assert!(
        tool_call_updates(&turn).is_empty(),
        "the turn ended before the job printed"
    );

    let chunks = output_chunks(&after);
    assert!(
        chunks.len() >= 2,
        "the output came in several updates: {chunks:?}"
    );
    assert_eq!(chunks.concat(), "tick 1\ntick 2\ntick 3\ntick 4\ntick 5\n");
    let last = final_update(&after);
    assert_eq!(status(last), "failed");
    assert_eq!(
        terminal_exit(last).unwrap(),
        serde_json::json!({"terminal_id": call.tool_call_id.0.to_string(), "exit_code": 3, "signal": null})
    );
    let zed = zed_replay(&[turn.clone(), after.clone()].concat());
    assert_eq!(zed.problems(), &[] as &[String]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_client_gets_the_console_block_when_the_job_ends() {
    let (_tmp, dir) = temp_dir();
    let (turn, after) = converse(ClientProfile::Plain, "plain job", async |mut c| {
        let session = c.new_session(&dir).await?;
        let turn = ask(
            &mut c,
            &session,
            "/bg until [ -e go ]; do sleep 0.01; done; echo done",
        )
        .await;
        std::fs::write(dir.join("go"), "").unwrap();
        let after = updates_until(&mut c, &session, has_final).await;
        Ok((turn, after))
    })
    .await;
    assert!(
        tool_call(&turn).meta.is_none(),
        "no card for a plain client"
    );
    assert!(message(&turn).contains("its tool call shows the output as it comes"));
    assert!(output_chunks(&after).is_empty());
    assert_eq!(status(final_update(&after)), "completed");
    assert_eq!(
        console_block(&after),
        "```console\ndone\n[exit code: 0]\n```"
    );
}

/// `/kill` ends the job's shell and what it started (here in the background and in a new
/// session), the card ends with the signal, and `/jobs` shows it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_stops_a_job_and_its_children() {
    let (_tmp, dir) = temp_dir();
    let name = process_name(&dir);
    converse(ClientProfile::Zed, "kill", async |mut c| {
        let session = c.new_session(&dir).await?;
        let script = format!(
            "(exec -a {name} sleep 600) & setsid bash -c 'exec -a {name} sleep 600' & wait"
        );
        let started = ask(&mut c, &session, &format!("/bg {script}")).await;
        let call = tool_call(&started).tool_call_id.0.to_string();
        guard("two children", async {
            while processes_named(&name).len() < 2 {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
        .await;

        let killed = ask(&mut c, &session, "/kill %1").await;
        let card_end = final_update(&killed);
        assert_eq!(card_end.tool_call_id.0.to_string(), call);
        assert_eq!(status(card_end), "failed");
        let exit = terminal_exit(card_end).unwrap();
        assert_eq!(exit["signal"], "SIGTERM", "{exit}");
        let said = message(&killed);
        assert!(said.starts_with("Killed job 1 ("), "{said}");
        assert!(said.ends_with("killed by SIGTERM."), "{said}");
        // The message comes after the card's end.
        let card_end_at = killed
            .iter()
            .position(
                |u| matches!(u, SessionUpdate::ToolCallUpdate(u) if u.fields.status.is_some()),
            )
            .unwrap();
        let message_at = killed
            .iter()
            .position(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .unwrap();
        assert!(card_end_at < message_at);
        assert!(
            wait_until_no_process(&name).await,
            "the job's children ({name}) outlived /kill"
        );

        let listed = message(&ask(&mut c, &session, "/jobs").await);
        assert!(listed.contains("killed by SIGTERM"), "{listed}");
        let again = message(&ask(&mut c, &session, "/kill 1").await);
        assert!(again.contains("had already ended"), "{again}");
        Ok(())
    })
    .await;
}

/// Closing the connection (stdin EOF) kills every job of every session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_connection_kills_every_job() {
    let (_tmp, dir) = temp_dir();
    let name = process_name(&dir);
    converse(ClientProfile::Plain, "eof", async |mut c| {
        for _ in 0..2 {
            let session = c.new_session(&dir).await?;
            ask(
                &mut c,
                &session,
                &format!("/bg (exec -a {name} sleep 600) & wait"),
            )
            .await;
        }
        guard("both jobs run", async {
            while processes_named(&name).len() < 2 {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
        .await;
        Ok(())
    })
    .await;
    // `converse` returned: the client closed the agent's stdin and the agent exited.
    assert!(
        wait_until_no_process(&name).await,
        "jobs ({name}) outlived the connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_job_limit_no_job_starts_and_the_message_says_why() {
    let (_tmp, dir) = temp_dir();
    let client = client_with(ClientProfile::Plain, &["--max-jobs", "2"]);
    run_with(client, "job limit", async |mut c| {
        let session = c.new_session(&dir).await?;
        for _ in 0..2 {
            let said = message(&ask(&mut c, &session, "/bg exec sleep 600").await);
            assert!(said.starts_with("Started job"), "{said}");
        }
        let refused = ask(&mut c, &session, "/bg exec sleep 600").await;
        let said = message(&refused);
        assert!(
            said.contains(
                "No job was started: 2 jobs are already running in this session (jobs 1, 2)"
            ),
            "{said}"
        );
        assert!(!refused
            .iter()
            .any(|u| matches!(u, SessionUpdate::ToolCall(_))));
        // Another session has its own limit.
        let other = c.new_session(&dir).await?;
        let said = message(&ask(&mut c, &other, "/bg exec sleep 600").await);
        assert!(said.starts_with("Started job 1"), "{said}");
        // Once one has ended, there is room again.
        ask(&mut c, &session, "/kill 2").await;
        let said = message(&ask(&mut c, &session, "/bg exec sleep 600").await);
        assert!(said.starts_with("Started job 3"), "{said}");
        Ok(())
    })
    .await;
}

/// Two sessions: each numbers its jobs from 1, lists and kills only its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jobs_of_two_sessions_are_independent() {
    let (_tmp, dir) = temp_dir();
    let name = process_name(&dir);
    converse(ClientProfile::Plain, "two sessions", async |mut c| {
        let a = c.new_session(&dir).await?;
        let b = c.new_session(&dir).await?;
        ask(&mut c, &a, &format!("/bg exec -a {name} sleep 600")).await;
        wait_for_process(&name).await;
        let listed = message(&ask(&mut c, &b, "/jobs").await);
        assert!(listed.contains("No background jobs"), "{listed}");
        let said = message(&ask(&mut c, &b, "/kill 1").await);
        assert!(said.contains("There is no job 1"), "{said}");
        assert_eq!(processes_named(&name).len(), 1, "a's job still runs");
        let said = message(&ask(&mut c, &b, "/bg exec sleep 600").await);
        assert!(said.starts_with("Started job 1 "), "{said}");
        let listed_a = message(&ask(&mut c, &a, "/jobs").await);
        assert!(listed_a.contains(&name), "{listed_a}");
        assert!(!listed_a.contains("exec sleep 600\n"), "{listed_a}");
        Ok(())
    })
    .await;
}

/// While a job runs, the session's commands run as usual; a job's `cd` does not move the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_commands_run_while_a_job_runs() {
    let (_tmp, dir) = temp_dir();
    std::fs::create_dir(dir.join("sub")).unwrap();
    converse(ClientProfile::Plain, "foreground", async |mut c| {
        let session = c.new_session(&dir).await?;
        ask(
            &mut c,
            &session,
            "/bg cd sub && until [ -e ../go ]; do sleep 0.01; done",
        )
        .await;
        let updates = ask(&mut c, &session, "echo while it runs").await;
        assert!(console_block(&updates).contains("while it runs\n[exit code: 0]"));
        std::fs::write(dir.join("go"), "").unwrap();
        updates_until(&mut c, &session, has_final).await;
        let updates = ask(&mut c, &session, "pwd").await;
        assert_eq!(
            console_block(&updates),
            format!("```console\n{}\n[exit code: 0]\n```", dir.display())
        );
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_shows_the_last_lines_while_running_and_after() {
    let (_tmp, dir) = temp_dir();
    converse(ClientProfile::Plain, "logs", async |mut c| {
        let session = c.new_session(&dir).await?;
        ask(
            &mut c,
            &session,
            "/bg seq 1 100; touch printed; until [ -e go ]; do sleep 0.01; done; echo bye",
        )
        .await;
        wait_for_file(&dir.join("printed")).await;
        let running = message(&ask(&mut c, &session, "/logs 1").await);
        let expected: String = (51..=100).map(|n| format!("{n}\n")).collect();
        assert_eq!(
            running,
            format!(
                "Last 50 lines of job 1 (`seq 1 100; touch printed; until [ -e go ]; do sleep 0.01; do…`, running):\n\n```console\n{expected}```"
            )
        );
        std::fs::write(dir.join("go"), "").unwrap();
        updates_until(&mut c, &session, has_final).await;
        let ended = message(&ask(&mut c, &session, "/logs %1 2").await);
        assert!(
            ended.starts_with("Last 2 lines of job 1 (") && ended.contains(", ended: exited 0):"),
            "{ended}"
        );
        assert!(ended.ends_with("```console\n100\nbye\n```"), "{ended}");
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_have_no_timeout_but_job_timeout_sets_one() {
    let (_tmp, dir) = temp_dir();
    // --timeout is for commands: a job outlives it.
    let client = client_with(
        ClientProfile::Plain,
        &["--timeout", "200ms", "--job-timeout", "2s"],
    );
    let after = run_with(client, "job timeout", async |mut c| {
        let session = c.new_session(&dir).await?;
        ask(
            &mut c,
            &session,
            "/bg sleep 1; echo outlived the command timeout; exec sleep 600",
        )
        .await;
        Ok(updates_until(&mut c, &session, has_final).await)
    })
    .await;
    let block = console_block(&after);
    assert!(
        block.contains("outlived the command timeout\n[timed out after 2s]"),
        "{block}"
    );
}

/// Issue 20, point 2 (and 21's acpx finding): a job's card gets what a turn's card gets, from
/// the same sequencer: for a plain client the live console view while the job runs (the job
/// waits for a file the test writes only once it has seen the view), `duration_ms`, and a
/// final update that carries the title again (it comes after the turn, and acpx shows an
/// untitled update untitled); on the card too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_card_has_the_live_view_duration_and_a_titled_end() {
    let script = "echo first; until [ -e go ]; do sleep 0.01; done; echo done";
    for profile in [ClientProfile::Plain, ClientProfile::Zed] {
        let (_tmp, dir) = temp_dir();
        let (turn, after) = converse(profile, "a job's card", async |mut c| {
            let session = c.new_session(&dir).await?;
            let turn = ask(&mut c, &session, &format!("/bg {script}")).await;
            let shows_first = |updates: &[SessionUpdate]| match profile {
                ClientProfile::Plain => tool_call_updates(updates).iter().any(|u| {
                    u.fields.status.is_none()
                        && serde_json::to_string(&u.fields.content)
                            .unwrap()
                            .contains("```console\\nfirst\\n```")
                }),
                _ => output_chunks(updates).concat().contains("first\n"),
            };
            // The first live update may be read before the prompt's answer (the client reads
            // notifications and responses apart), so the turn's updates count too.
            let live = updates_until(&mut c, &session, |updates| {
                shows_first(&[turn.as_slice(), updates].concat())
            })
            .await;
            assert!(
                !has_final(&[turn.as_slice(), &live].concat()),
                "{profile:?}: the view came while the job ran"
            );
            std::fs::write(dir.join("go"), "").unwrap();
            let after = updates_until(&mut c, &session, has_final).await;
            Ok((turn, after))
        })
        .await;
        let last = final_update(&after);
        let json = serde_json::to_value(last).unwrap();
        assert_eq!(json["title"], tool_call(&turn).title, "{profile:?}: {json}");
        assert_eq!(json["title"], script, "{profile:?}: {json}");
        assert!(
            json["rawOutput"]["duration_ms"].is_u64(),
            "{profile:?}: {json}"
        );
        assert_eq!(status(last), "completed", "{profile:?}");
    }
}
