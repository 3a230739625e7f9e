//! The ACP v2 face's wire: a bash call as an agent-owned terminal (draft ACP v2, the SDK's
//! `unstable_protocol_v2`), and the sink that sends v2 `session/update`s.
//!
//! Owns: what a call looks like to a v2 client: a `terminal_update` (command, cwd,
//! `capabilities.cancel`) announced before the `tool_call_update` whose content references it,
//! live output as `terminal_output_chunk`s (the bytes as the command wrote them, base64: a chunk
//! may end inside an escape sequence or a UTF-8 character, and LF stays LF, as the draft leaves
//! output bytes alone), the end as a `terminal_update` with `exitStatus` (which also withdraws
//! `capabilities.cancel`) followed by the call's final status and `rawOutput`, and a replayed
//! call's one `output` snapshot. Must not touch: the order of a call's updates (the sequencer's,
//! [`super::call_wire`]), what the v1 faces send (the bridge's), how commands run.

use agent_client_protocol::v1::schema::{ToolCallId, ToolCallStatus};
use agent_client_protocol::v2::schema::{
    self as v2, SessionUpdate, TerminalCancelCapabilities, TerminalCapabilities,
    TerminalExitStatus, TerminalOutput, TerminalOutputChunk, TerminalUpdate, ToolCallUpdate,
};
use agent_client_protocol::v2::ConnectionTo;
use agent_client_protocol::Client;
use base64::Engine as _;
use serde_json::Value;
use std::path::Path;

use super::call_wire::UpdateSink;
use crate::classify::CallKind;
use crate::present::CallView;

/// The terminal of call `id` (the same id: one terminal per call).
pub fn terminal_id(id: &ToolCallId) -> v2::TerminalId {
    v2::TerminalId::new(id.0.to_string())
}

/// Base64 of `data`'s bytes, as `terminal_output_chunk` and `output` carry them.
pub fn base64(data: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(data.as_bytes())
}

/// The terminal of a call that starts: its command and cwd, cancellable while it runs.
pub fn terminal_opened(id: &ToolCallId, command: &str, cwd: &Path) -> SessionUpdate {
    SessionUpdate::TerminalUpdate(
        terminal_named(id, command, cwd)
            .capabilities(TerminalCapabilities::new().cancel(TerminalCancelCapabilities::new())),
    )
}

/// The terminal of a replayed call that has ended: its command and cwd, nothing to cancel.
pub fn terminal_replayed(id: &ToolCallId, command: &str, cwd: &Path) -> SessionUpdate {
    SessionUpdate::TerminalUpdate(terminal_named(id, command, cwd))
}

fn terminal_named(id: &ToolCallId, command: &str, cwd: &Path) -> TerminalUpdate {
    TerminalUpdate::new(terminal_id(id))
        .command(command.to_string())
        .cwd(v2::AbsolutePath::new(cwd.to_path_buf()))
}

/// The call that shows the terminal: titled, `kind: execute`, in progress, its content the
/// terminal, its `rawInput` the command.
///
/// A classified call ([`CallView::classified`]) is of its kind (`read`, `search`), with its
/// title and `locations`; its output is still its terminal's.
pub fn call_opened(id: &ToolCallId, view: &CallView, command: &str) -> SessionUpdate {
    let update = ToolCallUpdate::new(v2::ToolCallId::new(id.0.to_string()))
        .status(v2::ToolCallStatus::InProgress)
        .content(vec![v2::ToolCallContent::Terminal(v2::Terminal::new(
            terminal_id(id),
        ))])
        .raw_input(serde_json::json!({ "command": command }));
    let update = match &view.classified {
        Some(classified) => update
            .title(classified.title.clone())
            .kind(match classified.kind {
                CallKind::Read | CallKind::List => v2::ToolKind::Read,
                CallKind::Search => v2::ToolKind::Search,
            })
            .locations(
                classified
                    .locations
                    .iter()
                    .map(|location| {
                        v2::ToolCallLocation::new(v2::AbsolutePath::new(location.path.clone()))
                            .line(location.line)
                    })
                    .collect::<Vec<_>>(),
            ),
        None => update.title(view.title.clone()).kind(v2::ToolKind::Execute),
    };
    SessionUpdate::ToolCallUpdate(update)
}

/// Live output: appended to the terminal.
pub fn chunk(id: &ToolCallId, data: &str) -> SessionUpdate {
    SessionUpdate::TerminalOutputChunk(TerminalOutputChunk::new(terminal_id(id), base64(data)))
}

/// A replayed terminal's whole output at once: one snapshot that replaces whatever it showed.
pub fn snapshot(id: &ToolCallId, command: &str, cwd: &Path, output: &str) -> SessionUpdate {
    SessionUpdate::TerminalUpdate(
        TerminalUpdate::new(terminal_id(id))
            .command(command.to_string())
            .cwd(v2::AbsolutePath::new(cwd.to_path_buf()))
            .output(TerminalOutput::new(base64(output))),
    )
}

/// The terminal's end: `exitStatus` (the exit code, or the signal's name), and no more cancel.
pub fn terminal_exited(
    id: &ToolCallId,
    exit_code: Option<i64>,
    signal: Option<String>,
) -> SessionUpdate {
    SessionUpdate::TerminalUpdate(
        TerminalUpdate::new(terminal_id(id))
            .exit_status(
                TerminalExitStatus::new()
                    .exit_code(exit_code)
                    .signal(signal),
            )
            .capabilities(agent_client_protocol::schema::MaybeUndefined::Null),
    )
}

/// The call's end: its status and `rawOutput` (the same object v1 clients get). `title` again
/// when given (a job's end comes after its turn).
pub fn call_ended(
    id: &ToolCallId,
    status: ToolCallStatus,
    raw_output: Option<Value>,
    title: Option<String>,
) -> SessionUpdate {
    let status = match status {
        ToolCallStatus::Completed => v2::ToolCallStatus::Completed,
        _ => v2::ToolCallStatus::Failed,
    };
    let mut update = ToolCallUpdate::new(v2::ToolCallId::new(id.0.to_string())).status(status);
    if let Some(raw) = raw_output {
        update = update.raw_output(raw);
    }
    if let Some(title) = title {
        update = update.title(title);
    }
    SessionUpdate::ToolCallUpdate(update)
}

/// Sends v2 updates as `session/update` notifications for one session on a v2 connection.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct V2Sink {
    connection: ConnectionTo<Client>,
    session_id: v2::SessionId,
    behind: Option<super::ClientBehind>,
}

impl V2Sink {
    /// A sink for `session_id`'s updates on `connection`.
    pub fn new(connection: ConnectionTo<Client>, session_id: v2::SessionId) -> Self {
        V2Sink {
            connection,
            session_id,
            behind: None,
        }
    }

    /// Wants no live output while `behind` is up (like [`super::ConnectionSink::skip_live_while`]).
    pub fn skip_live_while(mut self, behind: super::ClientBehind) -> Self {
        self.behind = Some(behind);
        self
    }
}

impl UpdateSink for V2Sink {
    fn send(&mut self, update: agent_client_protocol::v1::schema::SessionUpdate) {
        tracing::error!(?update, "a v1 update on a v2 connection: not sent");
    }

    fn send_v2(&mut self, update: SessionUpdate) {
        let notification = v2::UpdateSessionNotification::new(self.session_id.clone(), update);
        if let Err(error) = self.connection.send_notification(notification) {
            tracing::debug!(%error, "could not send session/update");
        }
    }

    fn live_wanted(&self) -> bool {
        !self
            .behind
            .as_ref()
            .is_some_and(super::ClientBehind::is_behind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes go as they are: LF stays LF, and a chunk that ends inside a UTF-8 character or an
    /// escape still decodes to exactly its bytes.
    #[test]
    fn chunks_carry_the_bytes_unchanged() {
        let id = ToolCallId::new("c");
        let update = serde_json::to_value(chunk(&id, "a\nb\u{1b}[3")).unwrap();
        let data = update["data"].as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
        assert_eq!(bytes, b"a\nb\x1b[3");
        assert_eq!(update["sessionUpdate"], "terminal_output_chunk");
        assert_eq!(update["terminalId"], "c");
    }
}
