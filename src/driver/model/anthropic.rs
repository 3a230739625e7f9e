//! The Anthropic messages API: `POST {base}/v1/messages` with `stream: true`, the key as
//! `x-api-key`, `anthropic-version` and a required `max_tokens`.
//!
//! Owns the request body (the system prompt at the top level; user and assistant messages
//! alternating, tool results as `tool_result` blocks of the next user message) and
//! [`EventReader`], which turns each named SSE event into [`Delta`]s: `text_delta`,
//! `thinking_delta`, `tool_use` blocks whose `input_json_delta` pieces are joined by block index,
//! usage from `message_start` and `message_delta`, the stop reason, and `error` events. Must not
//! touch: HTTP, retries, the loop.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::api::{ApiError, Delta, Finish, Message, ModelRequest, ReasoningPiece, TokenUsage};

/// The `anthropic-version` header sent.
pub const VERSION: &str = "2023-06-01";

/// The endpoint under `base` (which has no `/v1`, as `ANTHROPIC_BASE_URL`; a query such as a
/// gateway's `?key=` stays after the path).
pub fn url(base: &str) -> String {
    super::endpoint::join(base, "/v1/messages", None)
}

/// The JSON body of `request`.
pub fn body(request: &ModelRequest<'_>) -> Value {
    // Consecutive user-side items (tool results, then a prompt) make one user message.
    let mut messages: Vec<Value> = Vec::new();
    let mut push = |role: &str, block: Value| match messages.last_mut() {
        Some(last) if last["role"] == role => last["content"].as_array_mut().unwrap().push(block),
        _ => messages.push(json!({"role": role, "content": [block]})),
    };
    for message in request.messages {
        match message {
            Message::User(text) => push("user", json!({"type": "text", "text": text})),
            // In the user message they were given with (after its text).
            Message::Images(images) => {
                for image in images {
                    push(
                        "user",
                        json!({
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": image.mime_type,
                                "data": image.data,
                            },
                        }),
                    );
                }
            }
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                // Signed thinking goes back first, unchanged (the API checks the signature;
                // within a tool loop it refuses the call without it). Only while thinking is
                // on: a request without it takes no thinking blocks.
                if request.effort.is_some() {
                    for block in reasoning.iter().flat_map(|r| &r.blocks) {
                        push("assistant", block.clone());
                    }
                }
                if !text.is_empty() {
                    push("assistant", json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    // A model's malformed arguments go back as an empty object; the result
                    // says what was wrong with them.
                    let input = serde_json::from_str::<Value>(&call.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    push(
                        "assistant",
                        json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}),
                    );
                }
                if text.is_empty() && tool_calls.is_empty() {
                    push("assistant", json!({"type": "text", "text": "(no answer)"}));
                }
            }
            Message::ToolResult {
                call_id,
                content,
                is_error,
            } => push(
                "user",
                json!({
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": content,
                    "is_error": is_error,
                }),
            ),
        }
    }
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.parameters,
            })
        })
        .collect();
    // The model's own ceiling on `max_tokens`: above it the API refuses the request
    // ("max_tokens: 32768 > 32000, which is the maximum allowed number of output tokens for
    // claude-opus-4-1-…"), as a raised budget after a cut-off reply with high thinking asks.
    let cap = max_output_tokens(request.model).unwrap_or(u32::MAX);
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens.min(cap),
        "system": request.system,
        "messages": messages,
        "tools": tools,
        "stream": true,
    });
    if let Some(effort) = request.effort {
        // Extended thinking: the budget comes on top of the reply's own limit (the API wants
        // `budget_tokens` below `max_tokens`). Past the model's ceiling, `max_tokens` is the
        // ceiling and thinking takes at most half of it (never below the API's floor, 1024).
        let wanted = effort.thinking_budget();
        let total = request.max_tokens.saturating_add(wanted).min(cap);
        let budget = match total == cap {
            true => wanted.min(total / 2).max(1024),
            false => wanted,
        };
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        body["max_tokens"] = json!(total);
    }
    if request.cache_key.is_some() {
        super::cache::mark_anthropic(&mut body);
    }
    body
}

/// The most output tokens (`max_tokens`, thinking included) a Claude model takes, by family,
/// as Anthropic's models overview lists them: Claude Opus 4 and 4.1 32 000; Opus 4.5, Sonnet
/// 4 and 4.5, Haiku 4.5 and Sonnet 3.7 64 000; Opus 4.6 and later 4.x, Sonnet 4.6 128 000;
/// Claude 3.5 8 192; Claude 3 4 096. `None` for a name it does not know (a newer family, a
/// gateway's own name): the request is sent as asked.
pub fn max_output_tokens(model: &str) -> Option<u32> {
    let name = model.to_ascii_lowercase().replace('.', "-");
    if name.contains("claude-3-7-sonnet") {
        return Some(64_000);
    }
    if name.contains("claude-3-5-") {
        return Some(8_192);
    }
    if name.contains("claude-3-") {
        return Some(4_096);
    }
    for family in ["opus", "sonnet", "haiku"] {
        let Some(at) = name.find(&format!("{family}-")) else {
            continue;
        };
        // `opus-4-1-20250805`, `opus-4-20250514` (4.0), `sonnet-4-5`, `opus-4`.
        let mut parts = name[at + family.len() + 1..].split('-');
        let major: u32 = parts.next()?.parse().ok()?;
        let minor: u32 = match parts.next() {
            Some(part) if part.len() <= 2 => part.parse().ok()?,
            _ => 0,
        };
        return match (family, major, minor) {
            ("opus", 4, 0 | 1) => Some(32_000),
            ("sonnet", 4, 0) | (_, 4, 5) => Some(64_000),
            (_, 4, _) => Some(128_000),
            _ => None,
        };
    }
    None
}

/// Reads one reply's events; remembers which blocks are tool calls and whether their input
/// arrived.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct EventReader {
    /// Tool-use blocks by index: whether any input piece came.
    tool_blocks: BTreeMap<usize, bool>,
    /// `thinking` and `redacted_thinking` blocks by index, as they build up.
    thinking_blocks: BTreeMap<usize, Value>,
}

impl EventReader {
    /// The deltas of event `name` with `data`; `None` at `message_stop`.
    pub fn read(&mut self, name: &str, data: &str) -> Result<Option<Vec<Delta>>, ApiError> {
        if name == "ping" {
            return Ok(Some(Vec::new()));
        }
        let event: Value = serde_json::from_str(data).map_err(|error| {
            ApiError::Protocol(format!("event {name} is not JSON ({error}): {data}"))
        })?;
        let index = event["index"].as_u64().unwrap_or(0) as usize;
        let mut deltas = Vec::new();
        match event["type"].as_str().unwrap_or(name) {
            "message_start" => {
                let usage = &event["message"]["usage"];
                deltas.push(Delta::Usage(TokenUsage {
                    input: input_tokens(usage),
                    output: usage["output_tokens"].as_u64().unwrap_or(0),
                    cost: None,
                    cache_read: usage["cache_read_input_tokens"].as_u64().unwrap_or(0),
                    cache_write: usage["cache_creation_input_tokens"].as_u64().unwrap_or(0),
                }));
            }
            "content_block_start" => {
                let block = &event["content_block"];
                match block["type"].as_str() {
                    Some("tool_use") => {
                        self.tool_blocks.insert(index, false);
                        deltas.push(Delta::ToolCall {
                            index,
                            id: block["id"].as_str().map(str::to_string),
                            name: block["name"].as_str().map(str::to_string),
                            arguments: String::new(),
                        });
                    }
                    Some("text") => {
                        if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                            deltas.push(Delta::Text(text.to_string()));
                        }
                    }
                    Some("thinking") => {
                        if let Some(text) = block["thinking"].as_str().filter(|t| !t.is_empty()) {
                            deltas.push(Delta::Thinking(text.to_string()));
                        }
                        self.thinking_blocks.insert(index, block.clone());
                    }
                    Some("redacted_thinking") => {
                        self.thinking_blocks.insert(index, block.clone());
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        deltas.push(Delta::Text(delta["text"].as_str().unwrap_or("").into()))
                    }
                    Some("thinking_delta") => {
                        let piece = delta["thinking"].as_str().unwrap_or("");
                        if let Some(block) = self.thinking_blocks.get_mut(&index) {
                            let so_far = block["thinking"].as_str().unwrap_or("");
                            block["thinking"] = json!(format!("{so_far}{piece}"));
                        }
                        deltas.push(Delta::Thinking(piece.into()))
                    }
                    Some("signature_delta") => {
                        let piece = delta["signature"].as_str().unwrap_or("");
                        if let Some(block) = self.thinking_blocks.get_mut(&index) {
                            let so_far = block["signature"].as_str().unwrap_or("");
                            block["signature"] = json!(format!("{so_far}{piece}"));
                        }
                    }
                    Some("input_json_delta") => {
                        let piece = delta["partial_json"].as_str().unwrap_or("");
                        if !piece.is_empty() {
                            self.tool_blocks.insert(index, true);
                        }
                        deltas.push(Delta::ToolCall {
                            index,
                            id: None,
                            name: None,
                            arguments: piece.to_string(),
                        });
                    }
                    _ => {}
                }
            }
            // A thinking block is kept whole, with its signature, once it has ended.
            "content_block_stop" if self.thinking_blocks.contains_key(&index) => {
                let block = self.thinking_blocks.remove(&index).unwrap_or_default();
                deltas.push(Delta::Reasoning(ReasoningPiece::Block(block)));
            }
            // A tool without arguments streams none: its input is `{}`.
            "content_block_stop" if self.tool_blocks.get(&index) == Some(&false) => {
                self.tool_blocks.insert(index, true);
                deltas.push(Delta::ToolCall {
                    index,
                    id: None,
                    name: None,
                    arguments: "{}".into(),
                });
            }
            "message_delta" => {
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    deltas.push(Delta::Finish(match reason {
                        "end_turn" | "stop_sequence" => Finish::Stop,
                        "tool_use" => Finish::ToolCalls,
                        "max_tokens" => Finish::Length,
                        "refusal" => Finish::Refused,
                        other => Finish::Other(other.to_string()),
                    }));
                }
                let usage = &event["usage"];
                deltas.push(Delta::Usage(TokenUsage {
                    input: input_tokens(usage),
                    output: usage["output_tokens"].as_u64().unwrap_or(0),
                    cost: None,
                    cache_read: usage["cache_read_input_tokens"].as_u64().unwrap_or(0),
                    cache_write: usage["cache_creation_input_tokens"].as_u64().unwrap_or(0),
                }));
            }
            "message_stop" => return Ok(None),
            "error" => {
                let error = &event["error"];
                let message = error["message"]
                    .as_str()
                    .unwrap_or("unknown error")
                    .to_string();
                return Err(match error["type"].as_str() {
                    Some("overloaded_error" | "api_error") => ApiError::Server {
                        status: 0,
                        retry_after: None,
                        message,
                    },
                    Some("rate_limit_error") => ApiError::RateLimited {
                        retry_after: None,
                        message,
                    },
                    _ => ApiError::from_status(400, None, message),
                });
            }
            _ => {}
        }
        Ok(Some(deltas))
    }
}

/// Tokens read: the uncached input plus what was read from or written to the cache.
fn input_tokens(usage: &Value) -> u64 {
    [
        "input_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ]
    .iter()
    .filter_map(|key| usage[key].as_u64())
    .sum()
}

#[cfg(test)]
mod tests {
    use super::super::api::{ReplyBuilder, ToolCall};
    use super::*;

    #[test]
    fn the_endpoint_goes_before_a_base_urls_query() {
        assert_eq!(url("https://h/"), "https://h/v1/messages");
        assert_eq!(
            url("https://u:t@gw/anthropic?key=k"),
            "https://u:t@gw/anthropic/v1/messages?key=k"
        );
    }

    #[test]
    fn tool_results_and_the_next_prompt_share_one_user_message() {
        let messages = [
            Message::User("go".into()),
            Message::assistant(
                "Looking",
                vec![
                    ToolCall::new("t1", "bash", r#"{"command":"ls"}"#),
                    ToolCall::new("t2", "bash", "not json"),
                ],
            ),
            Message::ToolResult {
                call_id: "t1".into(),
                content: "[exit code: 0]".into(),
                is_error: false,
            },
            Message::ToolResult {
                call_id: "t2".into(),
                content: "invalid".into(),
                is_error: true,
            },
            Message::User("next".into()),
        ];
        let request = ModelRequest {
            model: "claude-x",
            system: "sys",
            messages: &messages,
            tools: &[],
            max_tokens: 64,
            effort: None,
            cache_key: None,
        };
        let body = body(&request);
        assert_eq!(body["system"], "sys");
        assert_eq!(body["max_tokens"], 64);
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(body["messages"][1]["content"][2]["input"], json!({}));
        assert_eq!(body["messages"][2]["content"][1]["is_error"], true);
        assert_eq!(body["messages"][2]["content"][2]["text"], "next");
    }

    #[test]
    fn max_tokens_stays_within_each_models_ceiling() {
        for (model, cap) in [
            ("claude-opus-4-1-20250805", Some(32_000)),
            ("claude-opus-4-20250514", Some(32_000)),
            ("claude-opus-4-0", Some(32_000)),
            ("anthropic/claude-opus-4.1", Some(32_000)),
            ("claude-opus-4-5-20251101", Some(64_000)),
            ("claude-sonnet-4-20250514", Some(64_000)),
            ("claude-sonnet-4-5", Some(64_000)),
            ("claude-haiku-4-5", Some(64_000)),
            ("claude-3-7-sonnet-20250219", Some(64_000)),
            ("claude-opus-4-6", Some(128_000)),
            ("claude-3-5-haiku-20241022", Some(8_192)),
            ("claude-3-haiku-20240307", Some(4_096)),
            ("claude-opus-5", None),
            ("fake-model", None),
        ] {
            assert_eq!(max_output_tokens(model), cap, "{model}");
        }
        let messages = [Message::User("go".into())];
        let mut request =
            ModelRequest::new("claude-opus-4-1-20250805", "s", &messages, &[], 16_384);
        request.effort = Some(super::super::api::Effort::High);
        let sent = body(&request);
        assert_eq!(sent["max_tokens"], 32_000);
        assert_eq!(sent["thinking"]["budget_tokens"], 16_000);
        // Within the ceiling nothing changes.
        request.max_tokens = 8192;
        let sent = body(&request);
        assert_eq!(sent["max_tokens"], 8192 + 16_384);
        assert_eq!(sent["thinking"]["budget_tokens"], 16_384);
        // Without thinking, the reply's own limit is clamped too.
        let request = ModelRequest::new("claude-3-5-haiku-latest", "s", &messages, &[], 16_384);
        assert_eq!(body(&request)["max_tokens"], 8_192);
    }

    #[test]
    fn a_streamed_tool_use_is_joined() {
        let events = [
            (
                "message_start",
                r#"{"type":"message_start","message":{"usage":{"input_tokens":12,"output_tokens":1}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
            ),
            ("ping", r#"{"type":"ping"}"#),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"l"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"s\"}"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":1}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
            ),
        ];
        let mut reader = EventReader::default();
        let mut reply = ReplyBuilder::default();
        let mut thinking = String::new();
        for (name, data) in events {
            for delta in reader.read(name, data).unwrap().unwrap() {
                if let Delta::Thinking(text) = &delta {
                    thinking.push_str(text);
                }
                reply.push(&delta);
            }
        }
        assert_eq!(
            reader
                .read("message_stop", r#"{"type":"message_stop"}"#)
                .unwrap(),
            None
        );
        let reply = reply.finish();
        assert_eq!(thinking, "hmm");
        assert_eq!(
            reply.tool_calls,
            [ToolCall::new("toolu_1", "bash", r#"{"command": "ls"}"#)]
        );
        assert_eq!(
            reply.usage,
            TokenUsage {
                input: 12,
                output: 9,
                cost: None,
                ..TokenUsage::default()
            }
        );
        assert_eq!(reply.finish, Some(Finish::ToolCalls));
        let overloaded =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert!(reader.read("error", overloaded).unwrap_err().is_retryable());
    }
}
