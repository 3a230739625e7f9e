//! What clients without Zed's terminal card see (acpx, Toad, …), over real pipes: a live console
//! view while the command runs, a one-line title, the status as `rawOutput` data, huge scripts
//! echoed as a few KiB, and a message (not an error) for a prompt with nothing to run.

use acp_bash::acp::client::{AcpClient, ClientProfile, Conversation};
use agent_client_protocol::v1::schema::{
    ContentBlock, ImageContent, PromptRequest, SessionUpdate, StopReason,
};
use serde_json::{json, Value};

use crate::support::acp::*;

const COUNT_THEN_WAIT: &str =
    "# Count, then wait\nseq 1 30\nwhile [ ! -e go ]; do sleep 0.01; done";

/// Reads updates into `updates` until one of them gives the call its final status.
async fn read_until_the_final_update(c: &mut Conversation, updates: &mut Vec<SessionUpdate>) {
    while tool_call_updates(updates)
        .iter()
        .all(|u| u.fields.status.is_none())
    {
        updates.push(c.next_update().await.expect("an update").update);
    }
}

fn raw_output(updates: &[SessionUpdate]) -> Value {
    final_update(updates)
        .fields
        .raw_output
        .clone()
        .expect("the final update carries rawOutput")
}

/// The command prints 30 lines, then blocks until the test creates `go`: the client must see a
/// console view of the last lines while it runs (no timing assumption: the test waits for it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_client_sees_the_last_lines_while_the_command_runs() {
    let (_tmp, dir) = temp_dir();
    for profile in [ClientProfile::Plain, ClientProfile::TerminalOnly] {
        let updates = converse(profile, "live console view", async |mut c| {
            let session = c.new_session(&dir).await?;
            let pending = c.start_prompt(&session, COUNT_THEN_WAIT).block_task();
            let mut updates = Vec::new();
            while !console_views(&updates).iter().any(|v| v.contains("\n30\n")) {
                updates.push(c.next_update().await.expect("an update").update);
            }
            assert!(
                tool_call_updates(&updates)
                    .iter()
                    .all(|u| u.fields.status.is_none()),
                "the command still runs"
            );
            std::fs::write(dir.join("go"), "").unwrap();
            assert_eq!(pending.await?.stop_reason, StopReason::EndTurn);
            read_until_the_final_update(&mut c, &mut updates).await;
            Ok(updates)
        })
        .await;
        std::fs::remove_file(dir.join("go")).unwrap();

        let call = tool_call(&updates);
        assert_eq!(call.title, "seq 1 30 … (1 more line)");
        let script = "$ seq 1 30\n$ while [ ! -e go ]; do sleep 0.01; done\n";
        let last_lines: String = (11..=30).map(|n| format!("{n}\n")).collect();
        let live = console_views(&updates);
        assert_eq!(
            live.last().unwrap(),
            &format!("```console\n{script}… (10 earlier lines)\n{last_lines}```"),
            "the last 20 lines, after the script"
        );
        let view = tool_call_updates(&updates)
            .into_iter()
            .find(|u| u.fields.status.is_none() && u.fields.content.is_some())
            .unwrap();
        assert_eq!(
            texts(view.fields.content.as_deref().unwrap())[0],
            "Count, then wait",
            "the description stays above the view"
        );
        let all: String = (1..=30).map(|n| format!("{n}\n")).collect();
        assert_eq!(
            console_block(&updates),
            format!("```console\n{script}{all}[exit code: 0]\n```"),
            "the final update is the whole result"
        );
        assert_eq!(status(final_update(&updates)), "completed");
    }
}

/// `--plain-live off`: the only update after the tool_call is the final one, even for a command
/// that prints and then runs for a while.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_live_off_sends_only_the_final_update() {
    let (_tmp, dir) = temp_dir();
    let client = AcpClient::new(
        binary(),
        ["serve", "--sandbox", "full", "--plain-live", "off"],
    )
    .profile(ClientProfile::Plain);
    let turn = guard(
        "plain-live off",
        client.run(async |mut c| {
            let session = c.new_session(&dir).await?;
            c.prompt(&session, "echo one; sleep 0.6; echo two").await
        }),
    )
    .await
    .unwrap();
    let updates = tool_call_updates(&turn.updates);
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert_eq!(
        console_block(&turn.updates),
        "```console\none\ntwo\n[exit code: 0]\n```"
    );
}

/// The status travels as data on every final update, card clients included, so that a client
/// that cuts the text (acpx shows 28 lines) still shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_final_update_carries_the_status_as_raw_output() {
    let (_tmp, dir) = temp_dir();
    for profile in [ClientProfile::Plain, ClientProfile::Zed] {
        let turn = converse(profile, "rawOutput", async |mut c| {
            let session = c.new_session(&dir).await?;
            c.prompt(&session, "seq 1 40; exit 3").await
        })
        .await;
        let mut raw = raw_output(&turn.updates);
        assert!(raw["duration_ms"].as_u64().is_some(), "{raw}");
        raw["duration_ms"] = json!("[DURATION]");
        assert_eq!(
            raw,
            json!({"exit_code": 3, "signal": null, "timed_out": false, "cancelled": false,
                   "truncated": false, "full_output": null, "cwd": dir.to_str().unwrap(),
                   "duration_ms": "[DURATION]"}),
            "{profile:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_command_says_so_in_raw_output() {
    let (_tmp, dir) = temp_dir();
    let updates = converse(ClientProfile::Plain, "cancel", async |mut c| {
        let session = c.new_session(&dir).await?;
        let pending = c
            .start_prompt(&session, "touch started; exec sleep 60")
            .block_task();
        wait_for_file(&dir.join("started")).await;
        c.cancel(&session)?;
        assert_eq!(pending.await?.stop_reason, StopReason::Cancelled);
        let mut updates = Vec::new();
        read_until_the_final_update(&mut c, &mut updates).await;
        Ok(updates)
    })
    .await;
    let raw = raw_output(&updates);
    assert_eq!(raw["cancelled"], true, "{raw}");
    assert_eq!(raw["exit_code"], Value::Null, "{raw}");
    assert!(raw["signal"].as_str().is_some(), "{raw}");
}

/// A script of some 300 KB runs (or fails to) as sent, but no line the agent writes echoes more
/// than a few KiB of it: not the title, not `rawInput`, not the console block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_script_is_never_echoed_whole() {
    let (_tmp, dir) = temp_dir();
    let script = format!(
        "echo start\n{}echo end",
        ": 0123456789012345678901234567890123456789\n".repeat(7_000)
    );
    for profile in [ClientProfile::Plain, ClientProfile::Zed] {
        let client = client(profile);
        let transcript = client.transcript();
        guard(
            "huge script",
            client.run(async |mut c| {
                let session = c.new_session(&dir).await?;
                c.prompt(&session, &script).await
            }),
        )
        .await
        .unwrap();
        let longest = transcript
            .lines()
            .iter()
            .filter(|line| line.starts_with("<- "))
            .map(String::len)
            .max()
            .unwrap();
        assert!(
            longest < 16 * 1024,
            "{profile:?}: a line of {longest} bytes"
        );
    }
}

/// Empty, blank, comment-only and image-only prompts: a message that says what to type, and
/// `end_turn`, never an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_with_nothing_to_run_gets_told_what_to_type() {
    let (_tmp, dir) = temp_dir();
    let image = ContentBlock::Image(ImageContent::new("iVBORw0KGgo=", "image/png"));
    let prompts: Vec<Vec<ContentBlock>> = vec![
        vec!["".into()],
        vec![" \n\t\n".into()],
        vec!["# just a thought\n# and another".into()],
        vec![image],
    ];
    for (profile, prompt) in [ClientProfile::Zed, ClientProfile::Plain]
        .into_iter()
        .flat_map(|p| prompts.iter().map(move |prompt| (p, prompt.clone())))
    {
        let updates = converse(profile, "nothing to run", async |mut c| {
            let session = c.new_session(&dir).await?;
            let response = c
                .connection()
                .send_request(PromptRequest::new(session.clone(), prompt.clone()))
                .block_task()
                .await?;
            assert_eq!(response.stop_reason, StopReason::EndTurn, "{prompt:?}");
            // The turn's updates came before its answer (the SDK keeps the wire's order).
            Ok(updates_already_here(&mut c))
        })
        .await;
        let messages: Vec<String> = updates
            .iter()
            .filter(|u| !matches!(u, SessionUpdate::AvailableCommandsUpdate(_)))
            .map(|u| match u {
                SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                    ContentBlock::Text(text) => text.text.clone(),
                    other => panic!("{other:?}"),
                },
                other => panic!("only a message, got {other:?}"),
            })
            .collect();
        assert_eq!(messages.len(), 1, "{prompt:?}: {messages:?}");
        assert!(
            messages[0].starts_with("Nothing to run") && messages[0].contains("/help"),
            "{messages:?}"
        );
    }
}
