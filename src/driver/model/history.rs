//! The conversation rebuilt from a session's record, for a session this driver has not seen in
//! this process (after `session/load` or `session/resume` in a new agent).
//!
//! Owns [`conversation_from_record`]: each recorded prompt as a user message, each call as a
//! `bash` tool call answered with its kept output and status, the agent's text between them.
//! Thinking is not recorded, so it is not sent again; nor are the agent's own notices (a failed
//! request, `Stopped: …`), which the record marks as such.
//!
//! Also owns [`bound`], which keeps a live conversation within its byte bound after each turn:
//! the oldest tool output goes first (replaced by a note), then, if that is not enough, the
//! oldest whole turns; the last turn is always kept. Must not touch: HTTP, ACP.

use serde_json::json;

use super::agent_loop::TRIMMED;

use super::api::{Message, ToolCall};
use crate::driver::commands;
use crate::store::{CallRecord, SessionRecord};
use crate::tool::markers::render_result;

/// The conversation that `record` holds, each result cut to its last `budget` bytes: each turn's
/// prompt, the agent's text placed among its calls, each call answered with its result. A turn
/// of a slash command is left out (it never reached the model); a `!COMMAND` turn is a user
/// message with the command's result.
pub fn conversation_from_record(record: &SessionRecord, budget: usize) -> Vec<Message> {
    let mut conversation = Vec::new();
    // Format 1: calls without turns, grouped by their prompt.
    let mut last_prompt: Option<&str> = None;
    for call in record.history.iter().filter(|call| call.turn.is_none()) {
        if let Some(command) = call.prompt.trim_start().strip_prefix('!') {
            conversation.push(bang(command, call, budget));
            last_prompt = None;
            continue;
        }
        if last_prompt != Some(call.prompt.as_str()) {
            conversation.push(Message::User(call.prompt.clone()));
            last_prompt = Some(call.prompt.as_str());
        }
        push_call(&mut conversation, String::new(), call, budget);
    }
    for turn in &record.turns {
        if commands::parse(&turn.prompt).is_some() {
            continue;
        }
        let calls: Vec<&CallRecord> = record
            .history
            .iter()
            .filter(|call| call.turn == Some(turn.number))
            .collect();
        if let Some(command) = turn.prompt.trim_start().strip_prefix('!') {
            if let Some(call) = calls.first() {
                conversation.push(bang(command, call, budget));
            }
            continue;
        }
        conversation.push(Message::User(turn.prompt.clone()));
        let said = |after: usize| -> String {
            turn.said
                .iter()
                // The agent's own notices (a failed request, a stop) were never the model's.
                .filter(|piece| piece.after_calls == after as u64 && !piece.notice)
                .map(|piece| piece.text.as_str())
                .collect()
        };
        for (i, call) in calls.iter().enumerate() {
            push_call(&mut conversation, said(i), call, budget);
        }
        let last = said(calls.len());
        if !last.is_empty() {
            conversation.push(Message::assistant(last, Vec::new()));
        }
    }
    conversation
}

fn result_of(call: &CallRecord, budget: usize) -> String {
    match &call.end {
        Some(end) => render_result(&tail(&end.output(), budget), &end.status()),
        None => "[the agent stopped before this command ended]".to_string(),
    }
}

fn bang(command: &str, call: &CallRecord, budget: usize) -> Message {
    Message::User(format!(
        "I ran this command myself:\n$ {}\n{}",
        command.trim(),
        result_of(call, budget)
    ))
}

fn push_call(conversation: &mut Vec<Message>, text: String, call: &CallRecord, budget: usize) {
    let mut arguments = json!({ "command": call.command });
    if let Some(description) = &call.description {
        arguments["description"] = json!(description);
    }
    conversation.push(Message::assistant(
        text,
        vec![ToolCall::new(&call.call_id, "bash", arguments.to_string())],
    ));
    conversation.push(Message::ToolResult {
        call_id: call.call_id.clone(),
        content: result_of(call, budget),
        is_error: false,
    });
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

/// The bytes `messages` hold (their text, tool calls' arguments, results).
pub fn size(messages: &[Message]) -> usize {
    messages
        .iter()
        .map(|message| match message {
            Message::User(text) => text.len(),
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                text.len()
                    + tool_calls
                        .iter()
                        .map(|c| c.id.len() + c.name.len() + c.arguments.len())
                        .sum::<usize>()
                    + reasoning.as_ref().map_or(0, |r| {
                        r.text.len()
                            + r.blocks
                                .iter()
                                .chain(&r.details)
                                .chain(r.call_extras.iter().map(|(_, e)| e))
                                .map(|v| v.to_string().len())
                                .sum::<usize>()
                    })
            }
            Message::ToolResult {
                call_id, content, ..
            } => call_id.len() + content.len(),
        })
        .sum()
}

/// Keeps `messages` within `max_bytes`: the oldest tool results are replaced by a note first,
/// oldest first; then whole turns (from one user prompt to the next) are dropped, oldest first.
/// The last turn (from the last user prompt on) is never touched. Returns whether anything
/// was trimmed.
pub fn bound(messages: &mut Vec<Message>, max_bytes: usize) -> bool {
    let mut total = size(messages);
    if total <= max_bytes {
        return false;
    }
    let last_turn = messages
        .iter()
        .rposition(|m| matches!(m, Message::User(_)))
        .unwrap_or(0);
    for message in &mut messages[..last_turn] {
        if total <= max_bytes {
            return true;
        }
        if let Message::ToolResult { content, .. } = message {
            if content.len() > TRIMMED.len() {
                total -= content.len() - TRIMMED.len();
                *content = TRIMMED.to_string();
            }
        }
    }
    // Drop whole turns: a turn starts at a user message, so what stays starts with one and no
    // tool result is left without its call.
    let mut start = 0;
    while total > max_bytes && start < last_turn {
        let next = messages[start + 1..last_turn]
            .iter()
            .position(|m| matches!(m, Message::User(_)))
            .map_or(last_turn, |i| start + 1 + i);
        total -= size(&messages[start..next]);
        start = next;
    }
    messages.drain(..start);
    true
}
