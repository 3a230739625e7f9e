//! The MCP servers a client passes in `session/new`, `session/load` and `session/resume`, on
//! the wire: turned into plain [`ServerConfig`]s for the MCP client ([`crate::mcp`]), and each
//! call of their tools shown as a tool call of its own.
//!
//! Owns: which transports are taken (stdio, and streamable HTTP where the build has it; SSE,
//! deprecated by MCP, is not: `initialize` does not advertise it, and a server of its kind is
//! told to the user), starting a session's servers, and the
//! tool call card of an MCP call (kind `other`, title `SERVER: TOOL`, the arguments as
//! `rawInput`, the result as its content). Must not touch: calling a tool (the MCP client's).

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    McpServer, SessionUpdate, ToolCall, ToolCallId, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use serde_json::json;

use super::session::SessionState;
use super::Connection;
use crate::mcp::{McpServers, ServerConfig};
use crate::present::mcp::McpCallView;

/// The servers of `servers` that acp-bash starts, and a sentence for each it does not.
pub(super) fn server_configs(servers: &[McpServer]) -> (Vec<ServerConfig>, Vec<String>) {
    let mut configs = Vec::new();
    let mut skipped = Vec::new();
    for server in servers {
        match server {
            McpServer::Stdio(stdio) => {
                let mut config = ServerConfig::stdio(
                    stdio.name.clone(),
                    stdio.command.to_string_lossy().into_owned(),
                    stdio.args.clone(),
                );
                for variable in &stdio.env {
                    config = config.env(variable.name.clone(), variable.value.clone());
                }
                configs.push(config);
            }
            McpServer::Http(http) => configs.push(ServerConfig::http(
                http.name.clone(),
                http.url.clone(),
                http.headers
                    .iter()
                    .map(|header| (header.name.clone(), header.value.clone()))
                    .collect(),
            )),
            McpServer::Sse(sse) => skipped.push(not_stdio(&sse.name, "SSE")),
            _ => skipped.push(
                "An MCP server of a kind acp-bash does not know was not started.".to_string(),
            ),
        }
    }
    (configs, skipped)
}

/// The servers of an ACP v2 `mcpServers` list, or the error for a transport acp-bash does not
/// take (v2: "Agents MUST reject a request with a transport they do not support with -32602").
pub(super) fn v2_server_configs(
    servers: &[agent_client_protocol::v2::schema::McpServer],
) -> Result<Vec<ServerConfig>, String> {
    use agent_client_protocol::v2::schema::McpServer as V2;
    let mut configs = Vec::new();
    for server in servers {
        match server {
            V2::Stdio(stdio) => {
                let mut config = ServerConfig::stdio(
                    stdio.name.clone(),
                    stdio.command.0.to_string_lossy().into_owned(),
                    stdio.args.clone(),
                );
                for variable in &stdio.env {
                    config = config.env(variable.name.clone(), variable.value.clone());
                }
                configs.push(config);
            }
            V2::Http(http) if crate::mcp::HTTP_SUPPORTED => configs.push(ServerConfig::http(
                http.name.clone(),
                http.url.clone(),
                http.headers
                    .iter()
                    .map(|header| (header.name.clone(), header.value.clone()))
                    .collect(),
            )),
            V2::Http(http) => {
                return Err(format!(
                    "MCP server \"{}\": this acp-bash was built without HTTP MCP servers; \
                     configure it as a command",
                    http.name
                ))
            }
            _ => {
                return Err(
                    "an MCP server's transport is not one acp-bash takes (stdio and http are)"
                        .to_string(),
                )
            }
        }
    }
    Ok(configs)
}

fn not_stdio(name: &str, transport: &str) -> String {
    format!(
        "MCP server \"{name}\" was not started: acp-bash connects to stdio and streamable HTTP \
         servers, not {transport} (MCP's deprecated transport). Use its streamable HTTP endpoint \
         (often /mcp) or configure it as a command."
    )
}

impl Connection {
    /// Starts `servers` for `state`, ending the servers it had (a session loaded again gets
    /// the ones its client gives now).
    pub(super) fn start_mcp(&self, state: &SessionState, servers: &[McpServer]) {
        let (configs, skipped) = server_configs(servers);
        self.start_mcp_configs(state, configs, skipped);
    }

    /// Starts `configs` for `state` (ending the servers it had), telling the user `skipped`.
    pub(super) fn start_mcp_configs(
        &self,
        state: &SessionState,
        configs: Vec<ServerConfig>,
        skipped: Vec<String>,
    ) {
        let started = McpServers::start(&state.session, configs, self.mcp_timeout);
        for sentence in skipped {
            started.note(sentence);
        }
        *state.mcp.lock().unwrap() = Arc::new(started);
    }
}

impl Connection {
    /// Starts `state`'s servers anew in the session's mode now, when it is not `was`: a
    /// server runs in its session's sandbox, and one started in a wider mode must not keep it
    /// (notes/2026-12-06-mcp-leftovers.md).
    pub(super) fn restart_mcp_if_mode_changed(
        &self,
        state: &SessionState,
        was: crate::sandbox::Mode,
    ) {
        let mode = state.session.mode();
        if mode == was {
            return;
        }
        let mut servers = state.mcp.lock().unwrap();
        if servers.is_empty() {
            return;
        }
        tracing::info!(
            from = was.id(),
            to = mode.id(),
            "the sandbox mode changed: MCP servers restart"
        );
        *servers = Arc::new(servers.restarted(&state.session));
    }
}

/// The `tool_call` that opens an MCP call.
pub(super) fn call_opened(call_id: &ToolCallId, view: &McpCallView) -> SessionUpdate {
    SessionUpdate::ToolCall(
        ToolCall::new(call_id.clone(), view.title.clone())
            .kind(ToolKind::Other)
            .status(ToolCallStatus::InProgress)
            .raw_input(view.raw_input.clone()),
    )
}

/// The opening of an MCP call for ACP v2, which has no `tool_call`: the `tool_call_update`
/// that creates the call (v2's upsert) with the same title, kind, status and input.
pub(super) fn call_opened_upsert(call_id: &ToolCallId, view: &McpCallView) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.clone(),
        ToolCallUpdateFields::new()
            .title(view.title.clone())
            .kind(ToolKind::Other)
            .status(ToolCallStatus::InProgress)
            .raw_input(view.raw_input.clone()),
    ))
}

/// The `tool_call_update` that ends an MCP call with `text` (failed when `is_error`).
pub(super) fn call_ended(call_id: &ToolCallId, text: &str, is_error: bool) -> SessionUpdate {
    let status = match is_error {
        true => ToolCallStatus::Failed,
        false => ToolCallStatus::Completed,
    };
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.clone(),
        ToolCallUpdateFields::new()
            .status(status)
            .content(vec![text.to_string().into()])
            .raw_output(json!({ "text": text, "isError": is_error })),
    ))
}
