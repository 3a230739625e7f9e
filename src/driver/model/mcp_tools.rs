//! The tools of the session's MCP servers, beside bash: offered to the model under their
//! qualified names (`mcp__SERVER__TOOL`, which cannot collide with bash, the job tools or each
//! other), and a call of one run through the turn ([`TurnHost::run_mcp`]: its own tool call
//! card). Must not touch: the MCP client, ACP.

use serde_json::Value;

use super::api::ToolSpec;
use super::tools::ToolAnswer;
use crate::driver::TurnHost;
use crate::mcp::McpTool;

/// The prefix of every MCP tool's name.
pub const PREFIX: &str = "mcp__";

/// The MCP tools as the model sees them.
pub fn specs(tools: &[McpTool]) -> Vec<ToolSpec> {
    tools
        .iter()
        .map(|tool| {
            let mut parameters = tool.input_schema.clone();
            if !parameters.is_object() || parameters.get("type").is_none() {
                parameters = serde_json::json!({"type": "object", "properties": {}});
            }
            ToolSpec {
                name: tool.qualified.clone(),
                description: format!(
                    "{} (tool {:?} of the MCP server {:?})",
                    tool.description.trim(),
                    tool.name,
                    tool.server
                ),
                parameters,
            }
        })
        .collect()
}

/// Runs the model's call of `name` (an MCP tool's qualified name) with `arguments`.
pub async fn run(turn: &mut dyn TurnHost, name: &str, arguments: Value) -> ToolAnswer {
    let tools = turn.mcp_tools().await;
    let Some(tool) = tools.into_iter().find(|tool| tool.qualified == name) else {
        return ToolAnswer {
            content: format!(
                "Nothing ran: there is no tool `{name}` (its MCP server is not running). Use \
                 the tools you were offered."
            ),
            is_error: true,
        };
    };
    let result = turn.run_mcp(tool, arguments).await;
    ToolAnswer {
        content: if result.text.is_empty() {
            "(no output)".to_string()
        } else {
            result.text
        },
        is_error: result.is_error,
    }
}
