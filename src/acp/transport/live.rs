//! Which outgoing lines are live output, the only ones the transport may drop when the client
//! stops reading.
//!
//! Owns: that one rule. A live-output line is a `session/update` notification whose
//! `tool_call_update` carries nothing but `_meta.terminal_output` (the bridge's `output_update`).
//! Everything else (responses, `tool_call`, final updates with a status or `terminal_exit`) is
//! never dropped.

use serde::de::IgnoredAny;
use serde::Deserialize;

#[derive(Deserialize)]
struct Message {
    method: Option<String>,
    params: Option<Params>,
    id: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Params {
    update: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Whether `line` is a live-output update (see the module doc).
pub fn is_live_output(line: &str) -> bool {
    let Ok(message) = serde_json::from_str::<Message>(line) else {
        return false;
    };
    if message.id.is_some() || message.method.as_deref() != Some("session/update") {
        return false;
    }
    let Some(update) = message.params.and_then(|params| params.update) else {
        return false;
    };
    let only_output = update
        .keys()
        .all(|key| ["sessionUpdate", "toolCallId", "_meta"].contains(&key.as_str()));
    let meta = update.get("_meta").and_then(|meta| meta.as_object());
    only_output
        && update.get("sessionUpdate").and_then(|kind| kind.as_str()) == Some("tool_call_update")
        && meta.is_some_and(|meta| meta.len() == 1 && meta.contains_key("terminal_output"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bare_terminal_output_updates_are_live_output() {
        let live = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","_meta":{"terminal_output":{"terminal_id":"c","data":"hi\n"}}}}}"#;
        assert!(is_live_output(live));
        for kept in [
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","status":"completed","_meta":{"terminal_output":{"terminal_id":"c","data":"hi\n"}}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","_meta":{"terminal_output":{"terminal_id":"c","data":"x"},"terminal_exit":{"terminal_id":"c","exit_code":0,"signal":null}}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"c","title":"x","_meta":{"terminal_output":{}}}}}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"session/update","params":{"update":{"sessionUpdate":"tool_call_update","_meta":{"terminal_output":{}}}}}"#,
            "not json",
        ] {
            assert!(!is_live_output(kept), "{kept}");
        }
    }
}
