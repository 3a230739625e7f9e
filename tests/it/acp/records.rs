//! Records written by an earlier version still load: `fixtures/format-1-session.json` was written
//! by the agent as it was before turns were recorded (format 1: each call with its own prompt;
//! four prompts, one of them `/bg`). Only its paths are moved to this test's directory. The real
//! binary loads and replays it as that version did, the session goes on, and the record it then
//! writes (format 2) replays the old calls and the new turn.

use std::path::Path;

use acp_bash::acp::client::ClientProfile;
use agent_client_protocol::v1::schema::{ContentBlock, SessionId, SessionUpdate};

use super::sessions::with_agent;
use crate::support::acp::temp_dir;

const FIXTURE: &str = include_str!("../fixtures/format-1-session.json");
const FIXTURE_ROOT: &str = "/tmp/c-turn/v1/ws";
const FIXTURE_ID: &str = "sess-992376e157e3768addf7a1ba7b3e4d43";

fn shown(updates: &[SessionUpdate]) -> Vec<String> {
    let text = |content: &ContentBlock| match content {
        ContentBlock::Text(text) => text.text.clone(),
        other => format!("{other:?}"),
    };
    updates
        .iter()
        .filter_map(|update| match update {
            SessionUpdate::UserMessageChunk(chunk) => {
                Some(format!("user: {}", text(&chunk.content)))
            }
            SessionUpdate::AgentMessageChunk(chunk) => {
                Some(format!("agent: {}", text(&chunk.content)))
            }
            SessionUpdate::ToolCall(call) => Some(format!("call {}", call.tool_call_id.0)),
            SessionUpdate::ToolCallUpdate(update) => update
                .fields
                .status
                .map(|status| format!("end {} {status:?}", update.tool_call_id.0)),
            _ => None,
        })
        .collect()
}

fn plant(state: &Path, root: &Path) {
    let sessions = state.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let record = FIXTURE.replace(FIXTURE_ROOT, root.to_str().unwrap());
    std::fs::write(sessions.join(format!("{FIXTURE_ID}.json")), record).unwrap();
}

#[tokio::test]
async fn a_record_written_before_turns_were_kept_loads_replays_and_goes_on() {
    let (_state_dir, state) = temp_dir();
    let (_root_dir, root) = temp_dir();
    plant(&state, &root);
    let id = SessionId::new(FIXTURE_ID);
    let old = [
        "user: # Say hello\necho hello",
        "call call-1-1",
        "end call-1-1 Completed",
        "user: mkdir -p sub && cd sub && printf 'two\\n'",
        "call call-1-2",
        "end call-1-2 Completed",
        "user: /bg echo job; sleep 0.1; echo job done",
        "call call-1-3",
        "end call-1-3 Completed",
        "user: pwd",
        "call call-1-4",
        "end call-1-4 Completed",
    ];
    let (replayed, _) = with_agent(
        ClientProfile::Zed,
        &state,
        "load format 1",
        async |mut c| {
            let (_, replayed) = c.load_session(&id, &root).await?;
            // The session goes on where the old one left it (`cd sub`), with the next call id.
            let turn = c.prompt(&id, "pwd").await?;
            Ok((replayed, turn))
        },
    )
    .await;
    let (replayed, turn) = replayed;
    assert_eq!(shown(&replayed), old, "{replayed:#?}");
    let sub = root.join("sub").canonicalize().unwrap();
    assert_eq!(
        shown(&turn.updates),
        ["call call-1-5", "end call-1-5 Completed"]
    );
    assert!(
        crate::support::acp::card_output(&turn.updates).contains(&sub.display().to_string()),
        "{:#?}",
        turn.updates
    );

    let record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(state.join("sessions").join(format!("{FIXTURE_ID}.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(record["format"], 2, "written back in this version's format");
    assert_eq!(record["turns"][0]["prompt"], "pwd");

    let (replayed, _) = with_agent(
        ClientProfile::Plain,
        &state,
        "load format 2",
        async |mut c| Ok(c.load_session(&id, &root).await?.1),
    )
    .await;
    let mut expected: Vec<String> = old.iter().map(|s| s.to_string()).collect();
    expected.extend([
        "user: pwd".into(),
        "call call-1-5".into(),
        "end call-1-5 Completed".into(),
    ]);
    assert_eq!(shown(&replayed), expected, "{replayed:#?}");
}
