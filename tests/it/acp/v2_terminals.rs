//! The ACP v2 face's rendering of a call (draft v2, agent-owned terminals), with a real command
//! in a real engine session, each update checked against the vendored v2 schema
//! (`support/vendor/acp-schema.v2.json`) as a `session/update`: the terminal is announced
//! (command, cwd, `capabilities.cancel`) before the `tool_call_update` that shows it, live output
//! is `terminal_output_chunk`s of base64 bytes (LF stays LF), the end is a `terminal_update` with
//! `exitStatus` (cancel withdrawn) and then the call's status and `rawOutput`; a cancelled
//! command's terminal ends with its signal.
//!
//! This is the rendering alone, below the face (`ToolCallRunner::on_v2` on a sink that keeps
//! what it is given). The v2 face the binary serves once `initialize` asks for version 2
//! (prompt, `terminal/cancel`, `state_update.background`, config options, replay on resume) is
//! tested over real pipes in `v2_face`.

use acp_bash::acp::call_wire::UpdateSink;
use acp_bash::acp::sdk::v1::schema::ToolCallId;
use acp_bash::acp::ToolCallRunner;
use acp_bash::exec::Exit;
use acp_bash::tool::BashCall;
use acp_bash::CancellationToken;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::support::acp::{guard, temp_dir, wait_for_file};
use crate::support::engine::full_session;
use crate::support::schema::schema_v2;

/// Keeps every v2 update, as the `session/update` params that carry it; a v1 update is a bug.
#[derive(Default)]
struct V2Updates(Vec<Value>);

impl UpdateSink for V2Updates {
    fn send(&mut self, update: acp_bash::acp::sdk::v1::schema::SessionUpdate) {
        panic!("a v1 update on the v2 face: {update:?}");
    }

    fn send_v2(&mut self, update: acp_bash::acp::sdk::v2::schema::SessionUpdate) {
        let params = json!({ "sessionId": "sess-1", "update": update });
        if let Err(problem) = schema_v2().validate("UpdateSessionNotification", &params) {
            panic!("{problem}\n{params}");
        }
        self.0.push(params["update"].clone());
    }
}

fn kinds(updates: &[Value]) -> Vec<&str> {
    updates
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .collect()
}

fn decoded(updates: &[Value]) -> Vec<u8> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "terminal_output_chunk")
        .flat_map(|u| {
            base64::engine::general_purpose::STANDARD
                .decode(u["data"].as_str().unwrap())
                .unwrap()
        })
        .collect()
}

#[tokio::test]
async fn a_command_is_a_terminal_announced_streamed_in_base64_chunks_and_ended_with_its_exit() {
    let (_tmp, dir) = temp_dir();
    let session = full_session(&dir);
    let mut sink = V2Updates::default();
    let id = ToolCallId::new("call-1-1");
    let call = BashCall::new("printf 'a\\nb\\r\\n\\033[31mred\\033[0m é\\n'; exit 3");
    let runner = ToolCallRunner::default().on_v2();
    let result = guard(
        "v2 call",
        runner.run(&session, &id, &call, &mut sink, &CancellationToken::new()),
    )
    .await;
    assert!(
        matches!(result.outcome.status.exit, Exit::Code(3)),
        "{:?}",
        result.outcome.status
    );
    let updates = &sink.0;
    let kinds = kinds(updates);
    assert_eq!(
        &kinds[..2],
        ["terminal_update", "tool_call_update"],
        "{updates:#?}"
    );
    let opened = &updates[0];
    assert_eq!(opened["terminalId"], "call-1-1");
    assert_eq!(opened["command"], call.command());
    assert_eq!(opened["cwd"], dir.to_str().unwrap());
    assert_eq!(opened["capabilities"], json!({ "cancel": {} }));
    let shown = &updates[1];
    assert_eq!(shown["toolCallId"], "call-1-1");
    assert_eq!(shown["kind"], "execute");
    assert_eq!(shown["status"], "in_progress");
    assert_eq!(
        shown["content"],
        json!([{ "type": "terminal", "terminalId": "call-1-1" }])
    );
    assert!(kinds[2..kinds.len() - 2]
        .iter()
        .all(|k| *k == "terminal_output_chunk"));
    // The bytes as the command wrote them: LF stays LF, CR LF stays CR LF, escapes and UTF-8
    // are untouched.
    assert_eq!(
        decoded(updates),
        "a\nb\r\n\u{1b}[31mred\u{1b}[0m é\n".as_bytes()
    );
    let exited = &updates[updates.len() - 2];
    assert_eq!(exited["sessionUpdate"], "terminal_update");
    assert_eq!(exited["exitStatus"], json!({ "exitCode": 3 }));
    assert_eq!(exited["capabilities"], Value::Null, "cancel withdrawn");
    let ended = updates.last().unwrap();
    assert_eq!(ended["sessionUpdate"], "tool_call_update");
    assert_eq!(ended["status"], "failed");
    assert_eq!(ended["rawOutput"]["exit_code"], 3);
}

#[tokio::test]
async fn a_cancelled_command_ends_its_terminal_with_the_signal() {
    let (_tmp, dir) = temp_dir();
    let session = full_session(&dir);
    let mut sink = V2Updates::default();
    let id = ToolCallId::new("call-1-2");
    let call = BashCall::new("touch started; exec sleep 600");
    let cancel = CancellationToken::new();
    let runner = ToolCallRunner::default().on_v2();
    let running = runner.run(&session, &id, &call, &mut sink, &cancel);
    let started = dir.join("started");
    let (result, ()) = guard("v2 cancel", async {
        tokio::join!(running, async {
            wait_for_file(&started).await;
            cancel.cancel();
        })
    })
    .await;
    assert!(result.outcome.status.cancelled);
    let exited = &sink.0[sink.0.len() - 2];
    assert_eq!(exited["sessionUpdate"], "terminal_update");
    assert!(exited["exitStatus"]["signal"].is_string(), "{exited}");
    assert_eq!(sink.0.last().unwrap()["status"], "failed");
}

/// A model's read, search and listing on the v2 face: the call is of its kind, titled, with
/// its locations (checked against the v2 schema), and keeps its terminal, which holds the
/// output. The snapshot is the transcript of the three calls' updates (temp dir as `[TMP]`).
#[tokio::test]
async fn a_classified_call_on_v2_is_of_its_kind_with_locations_and_keeps_its_terminal() {
    let (_tmp, dir) = temp_dir();
    std::fs::write(dir.join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::create_dir(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/a.rs"), "// a needle\n").unwrap();
    let runner = ToolCallRunner::default().on_v2();
    let mut transcript = Vec::new();
    for (n, command) in ["sed -n '2,3p' notes.txt", "grep -rn needle src", "ls src"]
        .into_iter()
        .enumerate()
    {
        let session = full_session(&dir);
        let mut sink = V2Updates::default();
        let id = ToolCallId::new(format!("call-1-{}", n + 1));
        let call = BashCall::new(command).classified(true);
        let cancel = CancellationToken::new();
        guard(
            "v2 classified",
            runner.run(&session, &id, &call, &mut sink, &cancel),
        )
        .await;
        let shown = &sink.0[1];
        assert_eq!(shown["sessionUpdate"], "tool_call_update");
        assert_eq!(
            shown["content"],
            json!([{ "type": "terminal", "terminalId": id.0.to_string() }])
        );
        transcript.extend(sink.0.iter().map(|update| {
            let line = update.to_string().replace(dir.to_str().unwrap(), "[TMP]");
            match update["rawOutput"]["duration_ms"].as_u64() {
                Some(ms) => line.replace(
                    &format!("\"duration_ms\":{ms}"),
                    "\"duration_ms\":\"[DURATION]\"",
                ),
                None => line,
            }
        }));
    }
    let kinds: Vec<String> = transcript
        .iter()
        .filter(|line| line.contains("\"kind\""))
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|u| format!("{} {} {}", u["kind"], u["title"], u["locations"]))
        .collect();
    assert_eq!(
        kinds,
        [
            r#""read" "Read notes.txt" [{"path":"[TMP]/notes.txt","line":2}]"#,
            r#""search" "Search 'needle' in src" [{"path":"[TMP]/src"}]"#,
            r#""read" "List src" [{"path":"[TMP]/src"}]"#,
        ]
    );
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("v2__classified_calls", transcript.join("\n"));
    });
}
