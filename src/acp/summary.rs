//! What a client reads from the wire about one tool call: its title, live output, status and exit,
//! whether it came as Zed's terminal card or as a console block.
//!
//! Owns: reading `tool_call` / `tool_call_update` notifications back into a [`CallSummary`], with
//! the markers' own parser for the console block. The one reader of the wire shared by the CLI
//! (`acp-bash run`, `acp-bash demo`) and the tests. Must not touch: how the agent writes them
//! (that is [`super::bridge`]).

use agent_client_protocol::v1::schema::{SessionUpdate, ToolCallContent};
use serde_json::Value;

use crate::exec::{Exit, RunStatus};
use crate::tool::markers::parse_console_result;

/// What a client saw of one call, read from the wire as a client would: start from
/// `CallSummary::default()` and [`CallSummary::apply`] each update.
#[derive(Debug, Default, Clone)]
#[non_exhaustive]
pub struct CallSummary {
    /// The `tool_call` title (the command).
    pub title: String,
    /// The cwd in `_meta.terminal_info`, on the card path.
    pub cwd: Option<String>,
    /// The description content block, if any.
    pub description: Option<String>,
    /// Every `terminal_output` data, joined.
    pub streamed: String,
    /// The final status (`completed`, `failed`).
    pub status: Option<String>,
    /// The exit code in `_meta.terminal_exit`.
    pub exit_code: Option<i64>,
    /// The signal name in `_meta.terminal_exit`.
    pub signal: Option<String>,
    /// The text content blocks of the latest update that had content (a plain client's live
    /// view while the call runs, its console block once it has ended).
    pub text: Vec<String>,
    /// The agent's messages (`agent_message_chunk` text) in the turn: a slash command's answer,
    /// the nothing-to-run hint.
    pub messages: Vec<String>,
    /// acp-bash's notices sent apart from the output (`_meta.acp_bash_notice`, to a client
    /// that asked for them so), in order.
    pub notices: Vec<String>,
}

impl CallSummary {
    /// Takes in one `session/update` of the call.
    pub fn apply(&mut self, update: &SessionUpdate) {
        match update {
            SessionUpdate::ToolCall(call) => {
                self.title = call.title.clone();
                self.cwd = meta_str(call.meta.as_ref(), "terminal_info", "cwd");
                self.description = call.content.iter().find_map(content_text);
            }
            SessionUpdate::ToolCallUpdate(update) => {
                if let Some(data) = meta_str(update.meta.as_ref(), "terminal_output", "data") {
                    self.streamed.push_str(&data);
                }
                if let Some(notice) = update
                    .meta
                    .as_ref()
                    .and_then(|m| m.get(super::bridge::NOTICE_META))
                    .and_then(Value::as_str)
                {
                    self.notices.push(notice.to_string());
                }
                if let Some(exit) = update.meta.as_ref().and_then(|m| m.get("terminal_exit")) {
                    self.exit_code = exit.get("exit_code").and_then(Value::as_i64);
                    self.signal = exit
                        .get("signal")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                }
                if let Some(status) = update.fields.status {
                    self.status = serde_json::to_value(status)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string));
                }
                if let Some(content) = &update.fields.content {
                    self.text = content.iter().filter_map(content_text).collect();
                }
            }
            SessionUpdate::AgentMessageChunk(chunk) => {
                if let agent_client_protocol::v1::schema::ContentBlock::Text(text) = &chunk.content
                {
                    self.messages.push(text.text.clone());
                }
            }
            _ => {}
        }
    }

    /// The exit status for `acp-bash run`: the card's exit, else the console block's marker.
    pub fn exit_status(&self) -> u8 {
        if let Some(code) = self.exit_code {
            return code.clamp(0, 255) as u8;
        }
        if let Some(signal) = &self.signal {
            return crate::exec::signal_number(signal).map_or(1, |n| (128 + n).clamp(0, 255) as u8);
        }
        // The plain path: read the console block's status line with the markers' own parser.
        let status = self
            .text
            .last()
            .and_then(|block| status_from_console(block));
        match status.map(|status| status.exit) {
            Some(Exit::Code(code)) => code.clamp(0, 255) as u8,
            Some(Exit::Signal(signal)) => (128 + signal).clamp(0, 255) as u8,
            None if self.status.as_deref() == Some("completed") => 0,
            None => 1,
        }
    }
}

/// The status of a ```` ```console ```` block (fence lines removed, then the markers' console
/// parser, which also reads the log line of a truncated run).
pub fn status_from_console(block: &str) -> Option<RunStatus> {
    let (_fence, rest) = block.split_once('\n')?;
    let (result_text, _fence) = rest.rsplit_once('\n')?;
    parse_console_result(result_text)
        .ok()
        .map(|(_, status)| status)
}

fn meta_str(
    meta: Option<&serde_json::Map<String, Value>>,
    key: &str,
    field: &str,
) -> Option<String> {
    meta?.get(key)?.get(field)?.as_str().map(str::to_string)
}

fn content_text(content: &ToolCallContent) -> Option<String> {
    match content {
        ToolCallContent::Content(content) => match &content.content {
            agent_client_protocol::v1::schema::ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_status_of_a_console_block_comes_from_its_markers() {
        let summary = |block: &str| CallSummary {
            text: vec![block.to_string()],
            status: Some("failed".into()),
            ..CallSummary::default()
        };
        assert_eq!(
            summary("```console\nhi\n[exit code: 3]\n```").exit_status(),
            3
        );
        assert_eq!(
            summary("```console\n[cancelled] [killed by signal: SIGTERM]\n```").exit_status(),
            143
        );
        assert_eq!(
            summary("````console\n```\n[exit code: 0]\n````").exit_status(),
            0
        );
        assert_eq!(summary("not a console block").exit_status(), 1);
    }
}
