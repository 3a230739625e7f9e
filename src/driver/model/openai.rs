//! The OpenAI chat-completions API (also llama.cpp's server, vLLM, Ollama, LM Studio and
//! gateways): `POST {base}/chat/completions` with `stream: true`, the key as a Bearer token.
//!
//! Owns the request body (messages, tools as functions, `stream_options.include_usage`) and the
//! translation of each `data:` chunk into [`Delta`]s: `content`, `reasoning_content` (the
//! servers that stream reasoning), tool-call pieces by index, `finish_reason`, the last chunk's
//! `usage` (with `cost` where a gateway such as OpenRouter reports it). Must not touch: HTTP, retries, the loop.

use serde_json::{json, Value};

use super::api::{ApiError, Delta, Finish, Message, ModelRequest, TokenUsage};

/// The endpoint under `base` (which ends in `/v1`, as `OPENAI_BASE_URL` does).
pub fn url(base: &str) -> String {
    format!("{}/chat/completions", base.trim_end_matches('/'))
}

/// The JSON body of `request`.
pub fn body(request: &ModelRequest<'_>) -> Value {
    let mut messages = vec![json!({"role": "system", "content": request.system})];
    for message in request.messages {
        messages.push(match message {
            Message::User(text) => json!({"role": "user", "content": text}),
            Message::Assistant { text, tool_calls } => {
                let mut value = json!({
                    "role": "assistant",
                    "content": if text.is_empty() { Value::Null } else { json!(text) },
                });
                if !tool_calls.is_empty() {
                    value["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments},
                            })
                        })
                        .collect();
                }
                value
            }
            Message::ToolResult {
                call_id, content, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        });
    }
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            })
        })
        .collect();
    json!({
        "model": request.model,
        "messages": messages,
        "tools": tools,
        "max_tokens": request.max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
    })
}

/// What one SSE event's `data` means: deltas, or the end (`[DONE]`).
pub fn parse_event(data: &str) -> Result<Option<Vec<Delta>>, ApiError> {
    let data = data.trim();
    if data == "[DONE]" {
        return Ok(None);
    }
    let chunk: Value = serde_json::from_str(data)
        .map_err(|error| ApiError::Protocol(format!("a chunk is not JSON ({error}): {data}")))?;
    if let Some(error) = chunk.get("error") {
        let message = error["message"]
            .as_str()
            .unwrap_or("unknown error")
            .to_string();
        return Err(ApiError::Server {
            status: 0,
            retry_after: None,
            message,
        });
    }
    let mut deltas = Vec::new();
    for choice in chunk["choices"].as_array().into_iter().flatten() {
        let delta = &choice["delta"];
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta[key].as_str().filter(|t| !t.is_empty()) {
                deltas.push(Delta::Thinking(text.to_string()));
            }
        }
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            deltas.push(Delta::Text(text.to_string()));
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let function = &call["function"];
            deltas.push(Delta::ToolCall {
                index: call["index"].as_u64().unwrap_or(0) as usize,
                id: call["id"].as_str().map(str::to_string),
                name: function["name"].as_str().map(str::to_string),
                arguments: function["arguments"].as_str().unwrap_or("").to_string(),
            });
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            deltas.push(Delta::Finish(match reason {
                "stop" => Finish::Stop,
                "tool_calls" | "function_call" => Finish::ToolCalls,
                "length" => Finish::Length,
                "content_filter" => Finish::Refused,
                other => Finish::Other(other.to_string()),
            }));
        }
    }
    if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
        deltas.push(Delta::Usage(TokenUsage {
            input: usage["prompt_tokens"].as_u64().unwrap_or(0),
            output: usage["completion_tokens"].as_u64().unwrap_or(0),
            // OpenRouter and some gateways: the request's cost in USD (credits).
            cost: usage["cost"]
                .as_f64()
                .filter(|c| c.is_finite() && *c >= 0.0),
        }));
    }
    Ok(Some(deltas))
}

#[cfg(test)]
mod tests {
    use super::super::api::{ToolCall, ToolSpec};
    use super::*;

    #[test]
    fn the_body_has_every_message_form() {
        let messages = [
            Message::User("list".into()),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall::new("c1", "bash", r#"{"command":"ls"}"#)],
            },
            Message::ToolResult {
                call_id: "c1".into(),
                content: "a\n[exit code: 0]".into(),
                is_error: false,
            },
        ];
        let tools = [ToolSpec {
            name: "bash".into(),
            description: "Run".into(),
            parameters: json!({"type": "object"}),
        }];
        let request = ModelRequest {
            model: "gpt-x",
            system: "You are",
            messages: &messages,
            tools: &tools,
            max_tokens: 100,
        };
        let body = body(&request);
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "You are"})
        );
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            r#"{"command":"ls"}"#
        );
        assert_eq!(body["messages"][3]["tool_call_id"], "c1");
        assert_eq!(body["tools"][0]["function"]["name"], "bash");
        assert_eq!(url("http://h/v1/"), "http://h/v1/chat/completions");
    }

    #[test]
    fn chunks_become_deltas() {
        let chunk = r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hm","content":"Hi",
            "tool_calls":[{"index":1,"id":"c","type":"function","function":{"name":"bash","arguments":"{\""}}]},
            "finish_reason":"tool_calls"}]}"#;
        let deltas = parse_event(chunk).unwrap().unwrap();
        assert_eq!(
            deltas,
            [
                Delta::Thinking("hm".into()),
                Delta::Text("Hi".into()),
                Delta::ToolCall {
                    index: 1,
                    id: Some("c".into()),
                    name: Some("bash".into()),
                    arguments: "{\"".into()
                },
                Delta::Finish(Finish::ToolCalls),
            ]
        );
        let usage =
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#;
        assert_eq!(
            parse_event(usage).unwrap().unwrap(),
            [Delta::Usage(TokenUsage {
                input: 5,
                output: 2,
                cost: None,
            })]
        );
        assert_eq!(parse_event("[DONE]").unwrap(), None);
        assert!(parse_event("{not json").is_err());
    }
}
