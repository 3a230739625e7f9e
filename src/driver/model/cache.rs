//! Prompt caching: what makes a provider read the conversation's prefix from its cache instead
//! of paying for it again at every step (`notes/2026-12-06-model-cache-and-compaction.md`).
//!
//! Owns the Anthropic breakpoints ([`mark_anthropic`]): one on the tools, one on the system
//! prompt, and two rolling ones on the latest user-side messages (the last one, which writes
//! this request's prefix, and the one before it, which the previous request wrote and this one
//! reads) — four, the API's most. And the OpenAI-compatible `prompt_cache_key`
//! ([`cache_key`]): one per session, so that a session's requests go to the same cache.
//! OpenAI's cache needs no marks: it matches the longest previous prefix, which the rest of the
//! driver keeps unchanged (a system prompt that never changes within a session, messages that
//! are only appended to, trimming with hysteresis). Must not touch: HTTP, ACP.

use serde_json::{json, Value};

/// The most `cache_control` breakpoints Anthropic accepts in one request.
pub const MAX_BREAKPOINTS: usize = 4;

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// Marks an Anthropic messages body in place: the last tool, the system prompt (made a text
/// block), and the last content block of the last two user messages. Never more than
/// [`MAX_BREAKPOINTS`]; thinking blocks are never marked (the API refuses that), and neither
/// are assistant messages (a request always ends with a user message).
pub fn mark_anthropic(body: &mut Value) {
    let mut marks = 0;
    if let Some(last) = body["tools"].as_array_mut().and_then(|t| t.last_mut()) {
        last["cache_control"] = ephemeral();
        marks += 1;
    }
    if let Some(system) = body["system"].as_str().filter(|s| !s.is_empty()) {
        body["system"] = json!([{"type": "text", "text": system, "cache_control": ephemeral()}]);
        marks += 1;
    }
    let Some(messages) = body["messages"].as_array_mut() else {
        return;
    };
    for message in messages.iter_mut().rev().filter(|m| m["role"] == "user") {
        if marks >= MAX_BREAKPOINTS {
            break;
        }
        let Some(block) = message["content"]
            .as_array_mut()
            .and_then(|blocks| blocks.last_mut())
            .filter(|b| b["type"] != "thinking" && b["type"] != "redacted_thinking")
        else {
            continue;
        };
        block["cache_control"] = ephemeral();
        marks += 1;
    }
}

/// The `prompt_cache_key` of session `session_id`: stable for the session's life, the same
/// for every model of the session, never the same for two sessions (OpenAI routes requests of
/// one key to the same cache).
pub fn cache_key(session_id: &str) -> String {
    format!("acp-bash-{session_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(body: &Value) -> usize {
        body.to_string().matches("cache_control").count()
    }

    #[test]
    fn four_breakpoints_at_most_on_tools_system_and_the_last_user_messages() {
        let mut body = json!({
            "system": "sys",
            "tools": [{"name": "a"}, {"name": "b"}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "1"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "u"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u"},
                                             {"type": "text", "text": "more"}]},
            ],
        });
        mark_anthropic(&mut body);
        assert_eq!(marks(&body), MAX_BREAKPOINTS);
        assert!(body["tools"][0].get("cache_control").is_none());
        assert_eq!(body["tools"][1]["cache_control"]["type"], "ephemeral");
        assert_eq!(body["system"][0]["text"], "sys");
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        assert!(body["messages"][0]["content"][0]
            .get("cache_control")
            .is_none());
        assert!(body["messages"][2]["content"][0]["cache_control"].is_object());
        assert!(body["messages"][4]["content"][0]
            .get("cache_control")
            .is_none());
        assert!(body["messages"][4]["content"][1]["cache_control"].is_object());
    }

    #[test]
    fn a_short_conversation_gets_fewer_marks() {
        let mut body = json!({"system": "s", "tools": [],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "1"}]}]});
        mark_anthropic(&mut body);
        assert_eq!(marks(&body), 2);
    }
}
