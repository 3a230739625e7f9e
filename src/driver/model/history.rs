//! The conversation rebuilt from a session's record, for a session this driver has not seen in
//! this process (after `session/load` or `session/resume` in a new agent).
//!
//! Owns [`conversation_from_record`]: each recorded prompt as a user message, each call as a
//! `bash` tool call answered with its kept output and status. The model's own words are not in
//! the record yet, so they are not sent again. Must not touch: HTTP, ACP.

use serde_json::json;

use super::api::{Message, ToolCall};
use crate::store::SessionRecord;
use crate::tool::markers::render_result;

/// The conversation that `record` holds, each result cut to its last `budget` bytes.
pub fn conversation_from_record(record: &SessionRecord, budget: usize) -> Vec<Message> {
    let mut conversation = Vec::new();
    let mut last_prompt: Option<&str> = None;
    for call in &record.history {
        let result = match &call.end {
            Some(end) => render_result(&tail(&end.output(), budget), &end.status()),
            None => "[the agent stopped before this command ended]".to_string(),
        };
        if let Some(command) = call.prompt.trim_start().strip_prefix('!') {
            conversation.push(Message::User(format!(
                "I ran this command myself:\n$ {}\n{result}",
                command.trim()
            )));
            last_prompt = None;
            continue;
        }
        if last_prompt != Some(call.prompt.as_str()) {
            conversation.push(Message::User(call.prompt.clone()));
            last_prompt = Some(call.prompt.as_str());
        }
        let mut arguments = json!({ "command": call.command });
        if let Some(description) = &call.description {
            arguments["description"] = json!(description);
        }
        conversation.push(Message::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCall::new(&call.call_id, "bash", arguments.to_string())],
        });
        conversation.push(Message::ToolResult {
            call_id: call.call_id.clone(),
            content: result,
            is_error: false,
        });
    }
    conversation
}

/// The last `budget` bytes of `text` (at a character boundary), with a line saying more came
/// before.
fn tail(text: &str, budget: usize) -> String {
    if text.len() <= budget {
        return text.to_string();
    }
    let mut cut = text.len() - budget;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    format!("[… earlier output left out …]\n{}", &text[cut..])
}
