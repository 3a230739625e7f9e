//! Which outgoing lines are live output, the only ones the transport may drop when the client
//! stops reading.
//!
//! Owns: that one rule. A live-output line is a `session/update` notification whose
//! `tool_call_update` carries nothing but `_meta.terminal_output` (the bridge's `output_update`),
//! or nothing but `content` (the console view of clients without the card, `console_update`,
//! which the next view or the final update replaces).
//! Everything else (responses, `tool_call`, final updates with a status or `terminal_exit`) is
//! never dropped.

use super::envelope::members;

/// Whether `line` is a live-output update (see the module doc). Reads the envelope without
/// decoding the output it carries.
pub fn is_live_output(line: &str) -> bool {
    fn find<'a>(members: &[(&[u8], &'a [u8])], key: &[u8]) -> Option<&'a [u8]> {
        members.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
    let live = || -> Option<bool> {
        let message = members(line.as_bytes())?;
        if find(&message, b"id").is_some() || find(&message, b"method")? != br#""session/update""# {
            return Some(false);
        }
        let update = members(find(&members(find(&message, b"params")?)?, b"update")?)?;
        if find(&update, b"sessionUpdate")? != br#""tool_call_update""# {
            return Some(false);
        }
        // A console view for clients without the card: content and nothing else.
        let console_view = update
            .iter()
            .all(|(key, _)| [&b"sessionUpdate"[..], b"toolCallId", b"content"].contains(key))
            && find(&update, b"content").is_some();
        if console_view {
            return Some(true);
        }
        let only_output = update
            .iter()
            .all(|(key, _)| [&b"sessionUpdate"[..], b"toolCallId", b"_meta"].contains(key));
        let meta = members(find(&update, b"_meta")?)?;
        Some(only_output && meta.len() == 1 && meta[0].0 == b"terminal_output")
    };
    live().unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bare_terminal_output_updates_are_live_output() {
        let live = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","_meta":{"terminal_output":{"terminal_id":"c","data":"hi\n"}}}}}"#;
        assert!(is_live_output(live));
        let view = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","content":[{"type":"content","content":{"type":"text","text":"```console\nhi\n```"}}]}}}"#;
        assert!(is_live_output(view));
        for kept in [
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","status":"completed","content":[]}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","content":[],"rawOutput":{}}}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"c","content":[]}}}"#,
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
