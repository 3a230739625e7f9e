//! The agent's methods over real pipes: initialize, errors that name the problem (and leave the
//! connection working), independent working directories, concurrent sessions, cancel.

use std::time::Instant;

use acp_bash::acp::client::ClientProfile;
use agent_client_protocol::v1::schema::{SessionId, SessionUpdate, StopReason};
use agent_client_protocol::ErrorCode;
use serde_json::json;

use crate::support::acp::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_names_the_agent() {
    let init = converse(ClientProfile::Zed, "initialize", async |c| Ok(c.init)).await;
    let info = init.agent_info.expect("agentInfo");
    assert_eq!(info.name, "acp-bash");
    assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_an_error_that_names_the_problem_and_the_connection_keeps_working() {
    let (_tmp, dir) = temp_dir();
    let missing = dir.join("does-not-exist");
    let result = converse(ClientProfile::Plain, "errors", async |mut c| {
        let relative = c.new_session("relative/dir".as_ref()).await.unwrap_err();
        let not_there = c.new_session(&missing).await.unwrap_err();
        let unknown = c
            .prompt(&SessionId::new("sess-404"), "echo hi")
            .await
            .unwrap_err();
        let session = c.new_session(&dir).await?;
        // A prompt with nothing to run is no error: it gets told what to type
        // (tests/it/acp/plain_clients.rs).
        let empty = c.prompt(&session, "").await?;
        let blank = c.prompt(&session, "  \n\n").await?;
        // After all that, the same connection still runs commands.
        let turn = c.prompt(&session, "echo still here").await?;
        Ok((relative, not_there, unknown, empty, blank, turn))
    })
    .await;
    let (relative, not_there, unknown, empty, blank, turn) = result;

    assert_eq!(relative.code, ErrorCode::INVALID_PARAMS);
    assert!(relative.message.contains("absolute"), "{relative:?}");
    assert!(relative.message.contains("relative/dir"), "{relative:?}");

    assert_eq!(not_there.code, ErrorCode::INVALID_PARAMS);
    assert!(
        not_there.message.contains("does-not-exist"),
        "{not_there:?}"
    );

    assert_eq!(unknown.code, ErrorCode::RESOURCE_NOT_FOUND);
    assert!(unknown.message.contains("unknown session"), "{unknown:?}");
    assert!(unknown.message.contains("sess-404"), "{unknown:?}");
    assert_eq!(unknown.data, Some(json!({"sessionId": "sess-404"})));

    for nothing_to_run in [&empty, &blank] {
        assert_eq!(nothing_to_run.stop_reason, StopReason::EndTurn);
        assert!(
            matches!(
                nothing_to_run.updates.as_slice(),
                [SessionUpdate::AgentMessageChunk(_)]
            ),
            "{nothing_to_run:?}"
        );
    }

    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    assert!(console_block(&turn.updates).contains("still here"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_have_independent_working_directories() {
    let (_tmp, dir) = temp_dir();
    std::fs::create_dir(dir.join("one")).unwrap();
    let (one, two, one_again) = converse(ClientProfile::Zed, "cwd", async |mut c| {
        let first = c.new_session(&dir).await?;
        let second = c.new_session(&dir).await?;
        c.prompt(&first, "cd one").await?;
        let one = c.prompt(&first, "pwd").await?;
        let two = c.prompt(&second, "pwd").await?;
        let one_again = c.prompt(&first, "pwd").await?;
        Ok((one, two, one_again))
    })
    .await;
    assert_eq!(
        card_output(&one.updates).trim_end(),
        dir.join("one").to_str().unwrap()
    );
    assert_eq!(card_output(&two.updates).trim_end(), dir.to_str().unwrap());
    assert_eq!(
        card_output(&one_again.updates).trim_end(),
        dir.join("one").to_str().unwrap()
    );
    // The card's header shows where the command started.
    let cwd = tool_call(&one.updates).meta.as_ref().unwrap()["terminal_info"]["cwd"].clone();
    assert_eq!(cwd, json!(dir.join("one").to_str().unwrap()));
}

/// Session A waits for a file that only session B's prompt creates: if prompts of different
/// sessions did not run at the same time, A would never finish (the hang guard would fire).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_in_different_sessions_run_concurrently() {
    let (_tmp, dir) = temp_dir();
    let go = dir.join("go");
    let (a, b) = converse(ClientProfile::Zed, "concurrent sessions", async |mut c| {
        let a = c.new_session(&dir).await?;
        let b = c.new_session(&dir).await?;
        let waiting = c
            .start_prompt(&a, "while [ ! -e go ]; do sleep 0.01; done; echo A saw go")
            .block_task();
        // Wait until A's command is running (its tool_call arrived) before starting B.
        loop {
            let n = c.next_update().await.expect("an update");
            if n.session_id == a && matches!(n.update, SessionUpdate::ToolCall(_)) {
                break;
            }
        }
        let b_turn = c.prompt(&b, "touch go && echo B made go").await?;
        let a_response = waiting.await?;
        Ok((a_response.stop_reason, b_turn))
    })
    .await;
    assert_eq!(a, StopReason::EndTurn);
    assert_eq!(card_output(&b.updates), "B made go\n");
    assert!(go.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_kills_the_running_command_at_once() {
    let (_tmp, dir) = temp_dir();
    let name = process_name(&dir);
    let script = format!("echo started; exec -a {name} sleep 60");
    let (stop, updates, cancel_to_answer) =
        converse(ClientProfile::Zed, "cancel", async |mut c| {
            let session = c.new_session(&dir).await?;
            let pending = c.start_prompt(&session, &script).block_task();
            let mut updates = Vec::new();
            // Wait for the command's first output: it is running.
            while card_output(&updates).is_empty() {
                updates.push(c.next_update().await.expect("an update").update);
            }
            wait_for_process(&name).await;
            let cancelled_at = Instant::now();
            c.cancel(&session)?;
            let response = pending.await?;
            let cancel_to_answer = cancelled_at.elapsed();
            // What the agent sent before its answer (the final update among it); no quiet
            // period: the SDK keeps the wire's order.
            updates.extend(updates_already_here(&mut c));
            Ok((response.stop_reason, updates, cancel_to_answer))
        })
        .await;
    assert_eq!(stop, StopReason::Cancelled);
    // `sleep 60` was killed: the answer came long before it would have ended.
    assert!(
        cancel_to_answer.as_secs() < 30,
        "cancel took {cancel_to_answer:?}"
    );
    eprintln!("session/cancel -> answer: {cancel_to_answer:?}");
    assert!(
        wait_until_no_process(&name).await,
        "the cancelled command ({name}) is still running"
    );
    let last = final_update(&updates);
    assert_eq!(status(last), "failed");
    assert!(
        last.fields.content.is_none(),
        "card updates carry no content"
    );
    let exit = terminal_exit(last).expect("terminal_exit");
    assert!(
        exit["exit_code"].is_null() || exit["exit_code"] != json!(0),
        "{exit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_call_ids_and_terminal_ids_are_unique_per_connection() {
    let (_tmp, dir) = temp_dir();
    let turns = converse(ClientProfile::Zed, "ids", async |mut c| {
        let a = c.new_session(&dir).await?;
        let b = c.new_session(&dir).await?;
        let mut turns = Vec::new();
        for session in [&a, &b, &a, &b] {
            turns.push(c.prompt(session, "true").await?);
        }
        Ok(turns)
    })
    .await;
    let mut ids = std::collections::HashSet::new();
    for turn in &turns {
        let call = tool_call(&turn.updates);
        let terminal = call.meta.as_ref().unwrap()["terminal_info"]["terminal_id"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            terminal,
            call.tool_call_id.0.as_ref(),
            "terminalId derives from the tool-call id"
        );
        assert!(ids.insert(terminal), "ids are never reused");
    }
}

/// The fallback path end to end: backtick runs in the output lengthen the fence, ANSI escapes are
/// stripped, the markers end the block, and the description stays on the final update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_console_block_survives_backticks_and_strips_colours() {
    let (_tmp, dir) = temp_dir();
    let turn = converse(ClientProfile::Plain, "fallback", async |mut c| {
        let session = c.new_session(&dir).await?;
        c.prompt(
            &session,
            "# Print a fenced block\nprintf '%s\\n' '```rust' 'fn main() {}' '```'; printf '\\033[31mred\\033[0m\\n'; exit 1",
        )
        .await
    })
    .await;
    let last = final_update(&turn.updates);
    assert_eq!(status(last), "failed");
    let blocks = texts(last.fields.content.as_deref().unwrap());
    assert_eq!(blocks[0], "Print a fenced block");
    assert_eq!(
        blocks[1],
        "````console\n```rust\nfn main() {}\n```\nred\n[exit code: 1]\n````"
    );
    assert!(
        last.meta.is_none(),
        "no card keys for a client that did not ask for them"
    );
}

/// A prompt queued behind a running one in the same session is cancelled with it and never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_also_stops_a_prompt_waiting_for_its_turn() {
    let (_tmp, dir) = temp_dir();
    let (first, second, updates) = converse(ClientProfile::Zed, "queued cancel", async |mut c| {
        let session = c.new_session(&dir).await?;
        let first = c
            .start_prompt(&session, "echo started; sleep 60")
            .block_task();
        let mut updates = Vec::new();
        while card_output(&updates).is_empty() {
            updates.push(c.next_update().await.expect("an update").update);
        }
        let second = c.start_prompt(&session, "touch second-ran").block_task();
        c.cancel(&session)?;
        let (first, second) = (first.await?, second.await?);
        // Both are answered: a tool call the queued prompt started would have come before its
        // answer, so it is here already (the SDK keeps the wire's order).
        updates.extend(updates_already_here(&mut c));
        Ok((first.stop_reason, second.stop_reason, updates))
    })
    .await;
    assert_eq!(first, StopReason::Cancelled);
    assert_eq!(second, StopReason::Cancelled);
    let calls = updates
        .iter()
        .filter(|u| matches!(u, SessionUpdate::ToolCall(_)))
        .count();
    assert_eq!(calls, 1, "the queued prompt never started a tool call");
    assert!(!dir.join("second-ran").exists());
}

/// JSON-RPC's own `$/cancel_request` for a prompt (the SDK sends it when a pending request is
/// cancelled) kills the command like `session/cancel`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_request_for_the_prompt_kills_the_command() {
    let (_tmp, dir) = temp_dir();
    let name = process_name(&dir);
    let script = format!("exec -a {name} sleep 60");
    let client = client(ClientProfile::Zed);
    let transcript = client.transcript();
    let updates = guard(
        "$/cancel_request",
        client.run(async |mut c| {
            let session = c.new_session(&dir).await?;
            let pending = c.start_prompt(&session, &script);
            wait_for_process(&name).await;
            pending.cancel()?;
            let mut updates = Vec::new();
            while !updates.iter().any(|u: &SessionUpdate| {
                matches!(u, SessionUpdate::ToolCallUpdate(t) if t.fields.status.is_some())
            }) {
                updates.push(c.next_update().await.expect("an update").update);
            }
            // The SDK drops the answer to a request it cancelled; wait until it crossed the pipe
            // (a poll on the transcript: no event marks the line; `converse` is the hang guard).
            while !transcript
                .lines()
                .iter()
                .any(|l| l.starts_with("<- ") && l.contains("stopReason"))
            {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            Ok(updates)
        }),
    )
    .await
    .unwrap();
    assert!(
        wait_until_no_process(&name).await,
        "the command ({name}) still runs"
    );
    assert_eq!(status(final_update(&updates)), "failed");
    let lines = transcript.lines();
    validate_wire(&lines);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("-> ") && l.contains("$/cancel_request")),
        "{lines:#?}"
    );
    let answer = lines
        .iter()
        .find(|l| l.starts_with("<- ") && l.contains("stopReason"))
        .expect("the prompt is answered");
    assert!(answer.contains("\"cancelled\""), "{answer}");
}

/// A prompt that holds a NUL byte is not run, and the card says why in the user's terms
/// (where the byte is, and that bash cannot take one), not an errno; the connection then runs
/// the next prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_byte_in_a_prompt_is_refused_with_the_reason() {
    let (_tmp, dir) = temp_dir();
    let (refused, next) = converse(ClientProfile::Plain, "nul byte", async |mut c| {
        let session = c.new_session(&dir).await?;
        let refused = c.prompt(&session, "echo one\necho 'not-run-a\0b'").await?;
        let next = c.prompt(&session, "echo still-here").await?;
        Ok((refused, next))
    })
    .await;
    let block = console_block(&refused.updates);
    assert!(
        block.contains("it holds a NUL byte (line 2, column 16), and bash cannot take one"),
        "{block}"
    );
    assert!(!block.contains("os error"), "{block}");
    // The card shows the script (`$ echo one`), and no line of its output.
    assert!(!block.contains("\none\n"), "nothing ran: {block}");
    assert!(block.contains("[exit code: 126]"), "{block}");
    assert!(console_block(&next.updates).contains("still-here"));
}

/// Under a pids limit that is reached (root, cgroup v1's pids controller: the agent started in
/// a cgroup of its own, whose `pids.max` is then set below what it holds), a command that cannot
/// get a process says which limit, in words, not "os error 11"; once the limit is raised, the
/// same session runs commands again. Off mode (a fork of the agent) and workspace (the
/// session's zygote, whose PID 1 cannot fork the shell).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_cannot_get_a_process_names_the_limit_reached() {
    use crate::support::skip;
    if !skip::skip_unless(skip::ROOT, skip::root()) {
        return;
    }
    let pids = std::path::Path::new("/sys/fs/cgroup/pids");
    if !pids.join("tasks").exists() {
        skip::record("a_command_that_cannot_get_a_process_names_the_limit_reached: no cgroup v1 pids hierarchy");
        return;
    }
    for mode in ["off", "workspace"] {
        let group = pids.join(format!("acp-bash-it-limit-{}-{mode}", std::process::id()));
        std::fs::create_dir(&group).expect("a pids cgroup for the agent");
        let agent = format!(
            "echo $$ > {}/cgroup.procs && exec {} serve --sandbox {mode} --no-history",
            group.display(),
            binary().display()
        );
        let client = acp_bash::acp::client::AcpClient::new("/bin/sh", ["-c", agent.as_str()])
            .profile(ClientProfile::Plain);
        let (_tmp, dir) = temp_dir();
        let max = group.join("pids.max");
        let current = group.join("pids.current");
        let ((refused, again), _) = converse_with(client, "pids limit", async |mut c| {
            let session = c.new_session(&dir).await?;
            c.prompt(&session, "true").await?;
            // Below what it holds (the kernel allows that): no process or thread more.
            std::fs::write(&max, "1").expect("set pids.max");
            let refused = c.prompt(&session, "echo not-run").await?;
            std::fs::write(&max, "max").expect("lift pids.max");
            let again = c.prompt(&session, "echo runs-again").await?;
            Ok((refused, again))
        })
        .await;
        let block = console_block(&refused.updates);
        assert!(
            block.contains("no process could be started: the agent's process limit (pids.max "),
            "{mode}: {block}"
        );
        assert!(!block.contains("os error"), "{mode}: {block}");
        assert!(!block.contains("not-run"), "{mode}: {block}");
        assert!(
            console_block(&again.updates).contains("runs-again"),
            "{mode}"
        );
        assert!(block.contains("(pids.max 1)"), "{mode}: {block}");
        // The agent has ended and removed its own folders under the group; its helpers end
        // with it (a hang guard only).
        let start = Instant::now();
        while std::fs::read_to_string(&current).is_ok_and(|n| n.trim() != "0") {
            assert!(
                start.elapsed() < hang_guard(),
                "{mode}: processes left in the group"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::fs::remove_dir(&group).expect("the agent left no folder in its cgroup");
    }
}
