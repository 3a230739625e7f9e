//! The agent's error builders and how it reads the connection's own end.
//!
//! Owns: the JSON-RPC errors the handlers answer with (unknown session, invalid params, auth
//! required), cutting client-supplied text before an error quotes it, and telling a client that
//! closed its end from a failure. Must not touch: what the handlers decide.

use agent_client_protocol::v1::schema::SessionId;
use agent_client_protocol::{Error, ErrorCode};
use serde_json::json;

pub(super) fn unknown_session(session_id: &SessionId) -> Error {
    Error::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("unknown session: {:?}", short(&session_id.0)),
    )
    .data(json!({ "sessionId": short(&session_id.0) }))
}

/// A client-supplied text as an error may quote it: cut after 100 bytes (on a character
/// boundary), so that an error never echoes a whole input back.
pub(super) fn short(text: &str) -> String {
    const MAX: usize = 100;
    if text.len() <= MAX {
        return text.to_string();
    }
    format!(
        "{}… ({} bytes)",
        crate::text::cut_at_boundary(text, MAX),
        text.len()
    )
}

pub(super) fn invalid_params(message: String, data: serde_json::Value) -> Error {
    Error::new(ErrorCode::INVALID_PARAMS, message).data(data)
}

/// The driver needs credentials before it can run a turn; `message` says which.
pub(super) fn auth_required(message: &str) -> Error {
    Error::auth_required().data(json!(message))
}

/// Whether the connection ended because the client closed the agent's stdout (a write failed
/// with EPIPE): the client went away, exactly as with EOF on stdin, and that is not a failure.
pub(super) fn client_closed_its_end(error: &Error) -> bool {
    let broken_pipe = format!("(os error {})", libc::EPIPE);
    let mentions = |value: &serde_json::Value| value.to_string().contains(&broken_pipe);
    error.message.contains(&broken_pipe) || error.data.as_ref().is_some_and(mentions)
}
