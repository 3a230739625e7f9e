//! The conversation rebuilt from a session's record, for a session this driver has not seen in
//! this process (after `session/load` or `session/resume` in a new agent).
//!
//! Owns [`conversation_from_record`]: each recorded prompt as a user message, each call as a
//! `bash` tool call answered with its kept output and status, the agent's text between them.
//! A prompt's images that the record kept go with it, as they were sent live (see
//! `notes/2026-12-06-images-on-load.md`); one it no longer keeps is a line in its place.
//! Thinking is not recorded, so it is not sent again; nor are the agent's own notices (a failed
//! request, `Stopped: …`), which the record marks as such.
//!
//! Also owns [`bound`], which keeps a live conversation within its byte bound after each turn:
//! the oldest tool output goes first (replaced by a note), then, if that is not enough, the
//! oldest whole turns; the last turn is always kept. Must not touch: HTTP, ACP.

use serde_json::json;

use super::agent_loop::TRIMMED;

use super::api::{Image, Message, ToolCall};
use crate::driver::commands;
use crate::store::{CallRecord, SessionRecord, TurnRecord};
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
        push_prompt(&mut conversation, turn);
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
    // The record keeps no more than the driver sends; bounded again all the same.
    super::bound_images(&mut conversation, super::MAX_CONVERSATION_IMAGE_BYTES);
    conversation
}

/// A recorded turn's prompt as its user message, with the images the record kept in the next
/// (as they were sent live); an image kept by type and size only, or of a type models do not
/// take, is a line of the prompt saying it was given and not sent.
fn push_prompt(conversation: &mut Vec<Message>, turn: &TurnRecord) {
    let mut text = turn.prompt.clone();
    let mut images = Vec::new();
    for image in &turn.images {
        let mime_type = image.mime_type.to_ascii_lowercase();
        let line = match &image.data {
            _ if !super::IMAGE_TYPES.contains(&mime_type.as_str()) => format!(
                "(The user gave an image of type {mime_type}, not sent: models take {} only.)",
                super::IMAGE_TYPES.join(", ")
            ),
            None => format!(
                "(The user gave an image of {} KiB here; not sent to you: this session's \
                 history no longer keeps it.)",
                image.bytes / 1024
            ),
            Some(data) => {
                images.push(Image::new(mime_type, data));
                continue;
            }
        };
        text.push_str("\n\n");
        text.push_str(&line);
    }
    conversation.push(Message::User(text));
    if !images.is_empty() {
        conversation.push(Message::Images(images));
    }
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

/// What one image counts as in [`size`]: about the 1 500 tokens models read of an image, at
/// four bytes a token.
pub const IMAGE_SIZE: usize = 6_000;

/// The bytes `messages` hold (their text, tool calls' arguments, results).
pub fn size(messages: &[Message]) -> usize {
    messages
        .iter()
        .map(|message| match message {
            Message::User(text) => text.len(),
            // Images have their own bound (`MAX_CONVERSATION_IMAGE_BYTES`); here each counts
            // as what a model reads of it, about 1 500 tokens.
            Message::Images(images) => images.len() * IMAGE_SIZE,
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
                                .chain(&r.message_extra)
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

/// Keeps `messages` within `max_bytes`, with hysteresis: once past it, old tool output is
/// trimmed down to [`low_water`] (three quarters of it), so that the trimmed prefix then stays
/// unchanged — and cached by the provider — for the many turns it takes to grow back. The
/// oldest tool results are replaced by a note first, oldest first; then, only while still past
/// `max_bytes`, whole turns (from one user prompt to the next) are dropped, oldest first. The
/// last turn (from the last user prompt on) is never
/// touched. Returns what was done, for the user (`None`: nothing).
pub fn bound(messages: &mut Vec<Message>, max_bytes: usize) -> Option<Trimmed> {
    let mut total = size(messages);
    if total <= max_bytes {
        return None;
    }
    let target = low_water(max_bytes);
    let mut trimmed = Trimmed::default();
    let last_turn = messages
        .iter()
        .rposition(|m| matches!(m, Message::User(_)))
        .unwrap_or(0);
    for message in &mut messages[..last_turn] {
        if total <= target {
            return Some(trimmed);
        }
        if let Message::ToolResult { content, .. } = message {
            if content.len() > TRIMMED.len() {
                total -= content.len() - TRIMMED.len();
                *content = TRIMMED.to_string();
                trimmed.outputs += 1;
            }
        }
    }
    // Drop whole turns (only as many as needed: prompts are worth more than the cache): a
    // turn starts at a user message, so what stays starts with one and no tool result is left
    // without its call.
    let mut start = 0;
    while total > max_bytes && start < last_turn {
        let next = messages[start + 1..last_turn]
            .iter()
            .position(|m| matches!(m, Message::User(_)))
            .map_or(last_turn, |i| start + 1 + i);
        total -= size(&messages[start..next]);
        start = next;
        trimmed.turns += 1;
    }
    messages.drain(..start);
    Some(trimmed)
}

/// The size [`bound`] trims to once past `max_bytes`: three quarters of it.
pub fn low_water(max_bytes: usize) -> usize {
    max_bytes / 4 * 3
}

/// What [`bound`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Trimmed {
    /// Tool results whose output was replaced by a note.
    pub outputs: usize,
    /// Whole turns dropped.
    pub turns: usize,
}

impl Trimmed {
    /// What the user is told.
    pub fn notice(&self, max_bytes: usize) -> String {
        let mut parts = Vec::new();
        if self.outputs > 0 {
            parts.push(format!("the output of {} old command(s)", self.outputs));
        }
        if self.turns > 0 {
            parts.push(format!("the {} oldest turn(s)", self.turns));
        }
        format!(
            "\n\n[The conversation passed its bound ({} KiB): {} removed from what the model \
             reads; the record keeps everything. `/compact` summarises instead.]\n",
            max_bytes / 1024,
            parts.join(" and ")
        )
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    fn turn(n: usize, output: usize) -> Vec<Message> {
        vec![
            Message::User(format!("prompt {n}")),
            Message::assistant("", vec![ToolCall::new(format!("c{n}"), "bash", "{}")]),
            Message::ToolResult {
                call_id: format!("c{n}"),
                content: "x".repeat(output),
                is_error: false,
            },
        ]
    }

    #[test]
    fn trimming_goes_down_to_the_low_water_mark_and_then_leaves_the_prefix_alone() {
        let max = 10_000;
        let mut messages: Vec<Message> = (0..12).flat_map(|n| turn(n, 1000)).collect();
        let trimmed = bound(&mut messages, max).unwrap();
        assert!(size(&messages) <= low_water(max), "{}", size(&messages));
        assert!(trimmed.outputs > 0);
        assert!(trimmed.notice(max).contains("old command"));
        // The next turns grow the conversation again; until it passes the bound again, the
        // messages already there are not touched (the cached prefix holds).
        let kept = messages.clone();
        let mut turns = 0;
        for n in 12.. {
            messages.extend(turn(n, 300));
            if size(&messages) > max {
                break;
            }
            assert_eq!(bound(&mut messages, max), None);
            assert_eq!(messages[..kept.len()], kept[..]);
            turns += 1;
        }
        assert!(turns >= 3, "only {turns} turns before the next trim");
    }

    #[test]
    fn whole_turns_go_when_outputs_are_not_enough_and_the_last_turn_stays() {
        let mut messages: Vec<Message> = (0..5).flat_map(|n| turn(n, 10)).collect();
        messages.push(Message::User("y".repeat(2000)));
        let trimmed = bound(&mut messages, 1000).unwrap();
        assert_eq!(trimmed.turns, 5);
        assert_eq!(messages, [Message::User("y".repeat(2000))]);
    }
}
