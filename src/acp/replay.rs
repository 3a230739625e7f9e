//! The replay of a stored session: the `session/update`s that `session/load` sends before it
//! answers, built from a [`SessionRecord`] with the bridge's own mapping, so a replayed call
//! looks like the live one did (a card with its output and exit for card clients, the console
//! block for the others).
//!
//! Owns: the order (per call: the prompt as `user_message_chunk`, the `tool_call`, the kept
//! output on the card path, the final update), and what is said instead of faked: calls the
//! history no longer keeps, and calls whose agent ended while they ran (shown as ended with it,
//! never restarted). Pure: no I/O. Must not touch: the record's shape (the store's), sending.

use agent_client_protocol::v1::schema::{ContentChunk, SessionUpdate, ToolCallId};

use super::bridge::{self, ClientFeatures};
use crate::present::{console_block, present_call, present_result, ResultView};
use crate::store::{CallRecord, SessionRecord};
use crate::tool::markers::render_result;
use crate::tool::BashCall;

/// What a replayed call that its agent never finished says.
pub const ENDED_WITH_THE_AGENT: &str = "[ended with the agent: the acp-bash process that ran this \
     command exited before it finished; it was not restarted]";

/// The updates that replay `record` to a client with `features`, oldest call first.
///
/// `running_here(call_id)` says whether this process is still running that call (a session
/// loaded again on the connection that runs it): such a call is replayed as started only, and
/// its live updates follow.
pub fn replay(
    record: &SessionRecord,
    features: ClientFeatures,
    running_here: impl Fn(&str) -> bool,
) -> Vec<SessionUpdate> {
    let mut updates = Vec::new();
    if record.dropped_calls > 0 {
        updates.push(agent_text(&format!(
            "({} earlier calls of this session are not kept in its history.)",
            record.dropped_calls
        )));
    }
    for call in &record.history {
        replay_call(call, features, &running_here, &mut updates);
    }
    updates
}

fn agent_text(text: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(text.to_string().into()))
}

fn replay_call(
    call: &CallRecord,
    features: ClientFeatures,
    running_here: &impl Fn(&str) -> bool,
    updates: &mut Vec<SessionUpdate>,
) {
    let id = ToolCallId::new(call.call_id.clone());
    let mut bash = BashCall::new(call.command.clone());
    bash.description = call.description.clone();
    let view = present_call(&bash, &call.cwd);
    updates.push(SessionUpdate::UserMessageChunk(ContentChunk::new(
        call.prompt.clone().into(),
    )));
    updates.push(SessionUpdate::ToolCall(bridge::tool_call(
        &id,
        &call.command,
        &view,
        features,
    )));
    let presented = match &call.end {
        Some(end) => {
            let output = end.output();
            if features.card() && !output.is_empty() {
                updates.push(SessionUpdate::ToolCallUpdate(bridge::output_update(
                    &id, &output,
                )));
            }
            present_result(&call.cwd, &render_result(&output, &end.status()))
        }
        None if running_here(&call.call_id) => return,
        None => ResultView::Text {
            console: console_block(ENDED_WITH_THE_AGENT),
        },
    };
    updates.push(SessionUpdate::ToolCallUpdate(bridge::final_update(
        &id, &view, &presented, features,
    )));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::RunStatus;
    use crate::store::CallEnd;
    use serde_json::{json, Value};

    const ZED: ClientFeatures = ClientFeatures::CARD;
    const PLAIN: ClientFeatures = ClientFeatures::PLAIN;

    fn record() -> SessionRecord {
        let mut record = SessionRecord::new("s", "/w".into(), "workspace", 1);
        for (n, end) in [(1, Some(0)), (2, None)] {
            record.push_call(CallRecord {
                prompt: format!("# Say {n}\necho {n}"),
                call_id: format!("call-{n}"),
                command: format!("echo {n}"),
                description: Some(format!("Say {n}")),
                cwd: "/w".into(),
                started_ms: n,
                end: end.map(|code| CallEnd::new(n, &RunStatus::exited(code), &format!("{n}\n"))),
            });
        }
        record
    }

    fn kinds(updates: &[SessionUpdate]) -> Vec<Value> {
        updates
            .iter()
            .map(|u| serde_json::to_value(u).unwrap()["sessionUpdate"].clone())
            .collect()
    }

    #[test]
    fn card_replay_has_prompt_call_output_and_exit() {
        let updates = replay(&record(), ZED, |_| false);
        assert_eq!(
            kinds(&updates),
            json!([
                "user_message_chunk",
                "tool_call",
                "tool_call_update",
                "tool_call_update",
                "user_message_chunk",
                "tool_call",
                "tool_call_update"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let output = serde_json::to_value(&updates[2]).unwrap();
        assert_eq!(output["_meta"]["terminal_output"]["data"], "1\n");
        let exit = serde_json::to_value(&updates[3]).unwrap();
        assert_eq!(exit["_meta"]["terminal_exit"]["exit_code"], 0);
        assert_eq!(exit["status"], "completed");
        let ended = serde_json::to_value(&updates[6]).unwrap();
        assert_eq!(ended["status"], "failed");
        assert!(
            ended.to_string().contains("ended with the agent"),
            "{ended}"
        );
    }

    #[test]
    fn plain_replay_has_the_console_block() {
        let updates = replay(&record(), PLAIN, |_| false);
        assert_eq!(updates.len(), 6);
        let done = serde_json::to_value(&updates[2]).unwrap();
        assert_eq!(
            done["content"][1]["content"]["text"],
            "```console\n1\n[exit code: 0]\n```"
        );
    }

    #[test]
    fn a_call_still_running_here_is_replayed_as_started_only() {
        let updates = replay(&record(), PLAIN, |id| id == "call-2");
        assert_eq!(updates.len(), 5);
    }
}
