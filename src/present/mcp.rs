//! How a call of an MCP server's tool looks: its title, what it was given, what it gave.
//!
//! Owns: the words of an MCP call's card (the ACP layer makes the card out of them). Must
//! not touch: calling the tool ([`crate::mcp`]), the wire.

use serde_json::Value;

use crate::mcp::{McpResult, McpTool};

/// The most bytes of a result shown on the card (the model gets
/// [`crate::mcp::MAX_RESULT_BYTES`]).
pub const MAX_SHOWN_BYTES: usize = 16 * 1024;

/// An MCP call as the client shows it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct McpCallView {
    /// `SERVER: TOOL`.
    pub title: String,
    /// The arguments, as the model gave them.
    pub raw_input: Value,
}

/// The view of calling `tool` with `arguments`.
pub fn present_mcp_call(tool: &McpTool, arguments: &Value) -> McpCallView {
    McpCallView {
        title: format!("{}: {}", tool.server, tool.name),
        raw_input: arguments.clone(),
    }
}

/// The text a card shows for `result`: its text (cut at [`MAX_SHOWN_BYTES`]), or a word
/// saying there was none.
pub fn mcp_result_text(result: &McpResult) -> String {
    if result.text.trim().is_empty() {
        return "(no output)".to_string();
    }
    super::script::cut(&result.text, MAX_SHOWN_BYTES).to_string()
}
