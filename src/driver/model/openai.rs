//! The OpenAI chat-completions API (also llama.cpp's server, vLLM, Ollama, LM Studio and
//! gateways): `POST {base}/chat/completions` with `stream: true`, the key as a Bearer token.
//!
//! Owns the request body (messages, tools as functions, `stream_options.include_usage`) and the
//! translation of each `data:` chunk into [`Delta`]s: `content`, `reasoning_content` (the
//! servers that stream reasoning), Gemini's thought summaries (`content` flagged
//! `extra_content.google.thought`) and signatures, tool-call pieces by index, `finish_reason`, the
//! last chunk's `usage` (with `cost` where a gateway such as OpenRouter reports it, llama.cpp's
//! `timings` where it gives no cached count). Must not touch: HTTP, retries, the loop.

use serde_json::{json, Value};

use super::api::{ApiError, Delta, Finish, Message, ModelRequest, ReasoningPiece, TokenUsage};

/// The endpoint under `base` (which ends in `/v1`, as `OPENAI_BASE_URL` does; a query such as
/// a gateway's `?key=` stays after the path).
pub fn url(base: &str) -> String {
    super::endpoint::join(base, "/chat/completions", None)
}

/// What the body carries that not every OpenAI-compatible server takes: chosen per server,
/// and changed once when a server's error asks for it ([`adapt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// The reply's limit as `max_completion_tokens` (OpenAI's own API, which refuses
    /// `max_tokens` for its reasoning models) rather than `max_tokens` (what other servers
    /// know).
    pub max_completion_tokens: bool,
    /// Ask for usage with `stream_options.include_usage` (some gateways refuse the field).
    pub stream_options: bool,
    /// Send the session's `prompt_cache_key` (a server that refuses the field is asked
    /// again without it).
    pub prompt_cache_key: bool,
    /// Gemini's OpenAI-compatible endpoint (`generativelanguage.googleapis.com`): a chosen
    /// reasoning level also asks for its thought summaries
    /// (`extra_body.google.thinking_config.include_thoughts`).
    pub gemini: bool,
}

impl Options {
    /// The options for the server at `base`: `max_completion_tokens` for OpenAI's own API
    /// (and Azure's), `max_tokens` elsewhere; `stream_options` everywhere.
    pub fn for_base(base: &str) -> Options {
        let host = base
            .split("://")
            .nth(1)
            .unwrap_or(base)
            .split(['/', '?', '#'])
            .next()
            .unwrap_or("")
            .rsplit('@')
            .next()
            .unwrap_or("")
            .split(':')
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        Options {
            max_completion_tokens: host == "api.openai.com" || host.ends_with(".openai.azure.com"),
            stream_options: true,
            prompt_cache_key: true,
            gemini: host == "generativelanguage.googleapis.com",
        }
    }
}

/// The options to try again with when `error` is a server's refusal of one of them (the
/// message names the field, as OpenAI's "Unsupported parameter: 'max_tokens' … Use
/// 'max_completion_tokens' instead" and gateways' "Unrecognized request argument supplied:
/// stream_options" do); `None` for any other error.
pub fn adapt(options: Options, error: &ApiError) -> Option<Options> {
    let ApiError::BadRequest {
        status: 400,
        message,
    } = error
    else {
        return None;
    };
    let message = message.to_ascii_lowercase();
    let mut adapted = options;
    if message.contains("stream_options") && options.stream_options {
        adapted.stream_options = false;
    } else if message.contains("prompt_cache_key") && options.prompt_cache_key {
        adapted.prompt_cache_key = false;
    } else if message.contains("max_completion_tokens") && !options.max_completion_tokens {
        adapted.max_completion_tokens = true;
    } else if message.contains("max_completion_tokens")
        && options.max_completion_tokens
        && (message.contains("unrecognized")
            || message.contains("unsupported")
            || message.contains("unknown"))
    {
        adapted.max_completion_tokens = false;
    } else {
        return None;
    }
    Some(adapted)
}

/// The JSON body of `request`.
pub fn body(request: &ModelRequest<'_>, options: Options) -> Value {
    let mut messages = vec![json!({"role": "system", "content": request.system})];
    for message in request.messages {
        // In the user message they were given with: its content becomes a list of parts, the
        // text first, then each image as a `data:` URL.
        if let Message::Images(images) = message {
            let parts = images
                .iter()
                .map(|image| json!({"type": "image_url", "image_url": {"url": image.data_url()}}));
            match messages.last_mut() {
                Some(last) if last["role"] == "user" => {
                    let content = match last["content"].take() {
                        Value::String(text) => vec![json!({"type": "text", "text": text})],
                        Value::Array(parts) => parts,
                        _ => Vec::new(),
                    };
                    last["content"] = Value::Array(content.into_iter().chain(parts).collect());
                }
                _ => messages.push(json!({"role": "user", "content": parts.collect::<Vec<_>>()})),
            }
            continue;
        }
        messages.push(match message {
            Message::User(text) => json!({"role": "user", "content": text}),
            Message::Images(_) => unreachable!("images join their user message above"),
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                let mut value = json!({
                    "role": "assistant",
                    "content": if text.is_empty() { Value::Null } else { json!(text) },
                });
                if !tool_calls.is_empty() {
                    value["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| {
                            let mut call_value = json!({
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments},
                            });
                            // Gemini: the call's thought signature goes back with it.
                            if let Some(extra) =
                                reasoning.as_ref().and_then(|r| r.call_extra(&call.id))
                            {
                                call_value["extra_content"] = extra.clone();
                            }
                            call_value
                        })
                        .collect();
                }
                if let Some(reasoning) = reasoning {
                    // Gemini: the signature of the reply itself goes back on the message,
                    // where its non-streamed reply carries it (its thought summaries do not:
                    // they are never sent back).
                    if let Some(extra) = &reasoning.message_extra {
                        value["extra_content"] = extra.clone();
                    }
                    // DeepSeek's thinking mode refuses a tool loop without it.
                    if reasoning.content_field && !tool_calls.is_empty() {
                        value["reasoning_content"] = json!(reasoning.text);
                    }
                    // OpenRouter: the details go back unchanged.
                    if !reasoning.details.is_empty() {
                        value["reasoning_details"] = json!(reasoning.details);
                    }
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
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "tools": tools,
        "stream": true,
    });
    let limit = match options.max_completion_tokens {
        true => "max_completion_tokens",
        false => "max_tokens",
    };
    body[limit] = json!(request.max_tokens);
    if options.stream_options {
        body["stream_options"] = json!({"include_usage": true});
    }
    if let Some(effort) = request.effort {
        body["reasoning_effort"] = json!(effort.id());
        // Gemini shows its thoughts only when asked (ai.google.dev's OpenAI-compatibility
        // page: `extra_body.google.thinking_config.include_thoughts`).
        if options.gemini {
            body["extra_body"] = json!({"google": {"thinking_config": {"include_thoughts": true}}});
        }
    }
    if let Some(key) = request.cache_key.filter(|_| options.prompt_cache_key) {
        body["prompt_cache_key"] = json!(key);
    }
    body
}

/// Reads one reply's chunks; numbers its tool calls (servers that send a call's pieces
/// without `index`, or every call as index 0 with its own id, included).
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ChunkReader {
    /// Each call of the reply so far, by our index: the server's index and the call's id.
    calls: Vec<(Option<u64>, String)>,
    /// Inside Gemini's thought summary: its content pieces are flagged
    /// `extra_content.google.thought`, the first opens with `<thought>`, and the first piece of
    /// the answer after them starts with `</thought>`.
    in_thought: bool,
}

impl ChunkReader {
    /// Our index of a call piece with the server's `index` and `id`.
    fn call_index(&mut self, index: Option<u64>, id: Option<&str>) -> usize {
        let id = id.filter(|id| !id.is_empty());
        if let Some(id) = id {
            if let Some(ours) = self.calls.iter().position(|(_, seen)| seen == id) {
                return ours;
            }
            // The first piece of a call whose id came late.
            if let Some(ours) = self
                .calls
                .iter()
                .position(|(at, seen)| index.is_some() && *at == index && seen.is_empty())
            {
                self.calls[ours].1 = id.to_string();
                return ours;
            }
            self.calls.push((index, id.to_string()));
            return self.calls.len() - 1;
        }
        let found = match index {
            Some(_) => self.calls.iter().rposition(|(at, _)| *at == index),
            None => self.calls.len().checked_sub(1),
        };
        found.unwrap_or_else(|| {
            self.calls.push((index, String::new()));
            self.calls.len() - 1
        })
    }

    /// A content piece split into thought and answer (Gemini's thought summaries come as
    /// content flagged `extra_content.google.thought`, wrapped in `<thought>` … `</thought>`).
    fn split_thought<'t>(&mut self, text: &'t str, flagged: bool) -> (&'t str, &'t str) {
        if flagged {
            let text = match self.in_thought {
                true => text,
                false => text.strip_prefix(THOUGHT_OPEN).unwrap_or(text),
            };
            self.in_thought = true;
            return match text.split_once(THOUGHT_CLOSE) {
                Some((thought, answer)) => {
                    self.in_thought = false;
                    (thought, answer)
                }
                None => (text, ""),
            };
        }
        if std::mem::take(&mut self.in_thought) {
            return ("", text.strip_prefix(THOUGHT_CLOSE).unwrap_or(text));
        }
        ("", text)
    }

    /// What one SSE event's `data` means: deltas, or the end (`[DONE]`).
    pub fn read(&mut self, data: &str) -> Result<Option<Vec<Delta>>, ApiError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(None);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|error| {
            ApiError::Protocol(format!("a chunk is not JSON ({error}): {data}"))
        })?;
        if let Some(error) = chunk.get("error") {
            return Err(mid_stream_error(error));
        }
        let mut deltas = Vec::new();
        for choice in chunk["choices"].as_array().into_iter().flatten() {
            let delta = &choice["delta"];
            // The thoughts are shown once, whichever fields carry them.
            let details: Vec<&Value> = delta["reasoning_details"]
                .as_array()
                .into_iter()
                .flatten()
                .collect();
            let thought = match (
                delta["reasoning_content"].as_str(),
                delta["reasoning"].as_str(),
            ) {
                (Some(text), _) => {
                    deltas.push(Delta::Reasoning(ReasoningPiece::ContentField));
                    text.to_string()
                }
                (None, Some(text)) => text.to_string(),
                (None, None) => details
                    .iter()
                    .filter_map(|d| d["text"].as_str().or(d["summary"].as_str()))
                    .collect(),
            };
            if !thought.is_empty() {
                deltas.push(Delta::Thinking(thought));
            }
            for detail in details {
                deltas.push(Delta::Reasoning(ReasoningPiece::Detail(detail.clone())));
            }
            let google = &delta["extra_content"]["google"];
            if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                let flagged = google["thought"].as_bool() == Some(true);
                let (thought, answer) = self.split_thought(text, flagged);
                if !thought.is_empty() {
                    deltas.push(Delta::Thinking(thought.to_string()));
                }
                if !answer.is_empty() {
                    deltas.push(Delta::Text(answer.to_string()));
                }
            }
            // Gemini: the thought signature of the reply itself (beside its text, not on a
            // call), kept to be sent back; the `thought` flag is not part of it.
            if let Some(signature) = google["thought_signature"]
                .as_str()
                .filter(|s| !s.is_empty())
            {
                deltas.push(Delta::Reasoning(ReasoningPiece::MessageExtra(
                    json!({"google": {"thought_signature": signature}}),
                )));
            }
            if delta["tool_calls"].is_array() {
                self.in_thought = false;
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let function = &call["function"];
                let index = self.call_index(call["index"].as_u64(), call["id"].as_str());
                deltas.push(Delta::ToolCall {
                    index,
                    id: call["id"]
                        .as_str()
                        .filter(|id| !id.is_empty())
                        .map(str::to_string),
                    name: function["name"].as_str().map(str::to_string),
                    arguments: function["arguments"].as_str().unwrap_or("").to_string(),
                });
                if let Some(extra) = call.get("extra_content").filter(|e| e.is_object()) {
                    deltas.push(Delta::Reasoning(ReasoningPiece::CallExtra {
                        index,
                        extra: extra.clone(),
                    }));
                }
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
        // llama.cpp's server: `timings` on the last chunk, `cache_n` the prompt's tokens read
        // from its cache and `prompt_n` those it evaluated (its usage's `prompt_tokens` is
        // their sum; builds before `prompt_tokens_details` say it only there).
        let timings = chunk.get("timings").filter(|t| t.is_object());
        let cache_n = timings.and_then(|t| t["cache_n"].as_u64()).unwrap_or(0);
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            deltas.push(Delta::Usage(TokenUsage {
                input: usage["prompt_tokens"].as_u64().unwrap_or(0),
                output: usage["completion_tokens"].as_u64().unwrap_or(0),
                // OpenRouter and some gateways: the request's cost in USD (credits).
                cost: usage["cost"]
                    .as_f64()
                    .filter(|c| c.is_finite() && *c >= 0.0),
                // Included in `prompt_tokens`.
                cache_read: usage["prompt_tokens_details"]["cached_tokens"]
                    .as_u64()
                    .unwrap_or(cache_n),
                cache_write: 0,
            }));
        } else if let Some(timings) = timings {
            // No usage (not asked with `stream_options`): the timings are the count.
            let prompt_n = timings["prompt_n"].as_u64().unwrap_or(0);
            deltas.push(Delta::Usage(TokenUsage {
                input: cache_n + prompt_n,
                output: timings["predicted_n"].as_u64().unwrap_or(0),
                cost: None,
                cache_read: cache_n,
                cache_write: 0,
            }));
        }
        Ok(Some(deltas))
    }
}

/// How Gemini's OpenAI-compatible endpoint opens and closes its thought summary in `content`.
const THOUGHT_OPEN: &str = "<thought>";
/// See [`THOUGHT_OPEN`].
const THOUGHT_CLOSE: &str = "</thought>";

/// [`ChunkReader::read`] of one chunk, with a reader of its own (a reply of one chunk).
pub fn parse_event(data: &str) -> Result<Option<Vec<Delta>>, ApiError> {
    ChunkReader::default().read(data)
}

/// An error a stream sends after its answer began (OpenRouter: `{"error": {"code", "message",
/// "metadata"}}` beside the choices): a numeric `code` is an HTTP status and is classified as
/// one (a 402 "out of credits" or a 400 is final, never retried; a 5xx is retried); a string
/// code names quota or overflow where it is one of theirs; anything else is the server's
/// failure, retried. The message names the provider and its own words where OpenRouter relays
/// them (`metadata.provider_name`, `metadata.raw`), as for an error before the stream.
fn mid_stream_error(error: &Value) -> ApiError {
    let (message, relayed_code) = match error["message"].as_str() {
        Some(_) => super::client::error_object_fields(error, ""),
        None => ("unknown error".to_string(), None),
    };
    let code = &error["code"];
    if let Some(status) = code
        .as_u64()
        .filter(|c| (400..600).contains(c))
        .and_then(|c| u16::try_from(c).ok())
    {
        return ApiError::from_answer(status, None, message, error["type"].as_str());
    }
    let named = relayed_code.as_deref().or(code.as_str());
    if let Some(named) = named {
        let classified = ApiError::from_answer(0, None, message.clone(), Some(named));
        if matches!(
            classified,
            ApiError::Quota { .. } | ApiError::ContextOverflow(_)
        ) {
            return classified;
        }
    }
    ApiError::Server {
        status: 0,
        retry_after: None,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::super::api::{ToolCall, ToolSpec};
    use super::*;

    #[test]
    fn the_body_has_every_message_form() {
        let messages = [
            Message::User("list".into()),
            Message::assistant("", vec![ToolCall::new("c1", "bash", r#"{"command":"ls"}"#)]),
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
            effort: None,
            cache_key: None,
        };
        let body = body(&request, Options::for_base("http://h/v1"));
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
        assert_eq!(
            url("http://u:t@h/v1?key=k"),
            "http://u:t@h/v1/chat/completions?key=k"
        );
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
                Delta::Reasoning(ReasoningPiece::ContentField),
                Delta::Thinking("hm".into()),
                Delta::Text("Hi".into()),
                Delta::ToolCall {
                    index: 0,
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
                ..TokenUsage::default()
            })]
        );
        assert_eq!(parse_event("[DONE]").unwrap(), None);
        assert!(parse_event("{not json").is_err());
    }

    #[test]
    fn gemini_gets_include_thoughts_with_a_chosen_level_only() {
        let messages = [Message::User("hi".into())];
        let mut request = ModelRequest::new("gemini-3-flash-preview", "s", &messages, &[], 100);
        let gemini = Options::for_base("https://generativelanguage.googleapis.com/v1beta/openai");
        assert!(gemini.gemini);
        assert!(!Options::for_base("http://127.0.0.1:8080/v1").gemini);
        assert!(body(&request, gemini).get("extra_body").is_none());
        request.effort = Some(super::super::api::Effort::High);
        let asked = body(&request, gemini);
        assert_eq!(asked["reasoning_effort"], "high");
        assert_eq!(
            asked["extra_body"],
            json!({"google": {"thinking_config": {"include_thoughts": true}}})
        );
        let elsewhere = body(&request, Options::for_base("http://127.0.0.1:8080/v1"));
        assert!(elsewhere.get("extra_body").is_none(), "{elsewhere}");
    }

    #[test]
    fn llama_cpp_timings_count_cached_tokens_where_usage_does_not() {
        let timings = r#""timings":{"cache_n":398,"prompt_n":14,"predicted_n":37}"#;
        let both = format!(
            r#"{{"choices":[],"usage":{{"prompt_tokens":412,"completion_tokens":37}},{timings}}}"#
        );
        let usage = |deltas: Vec<Delta>| match deltas.as_slice() {
            [Delta::Usage(usage)] => *usage,
            other => panic!("{other:?}"),
        };
        let read = usage(parse_event(&both).unwrap().unwrap());
        assert_eq!((read.input, read.output, read.cache_read), (412, 37, 398));
        // `prompt_tokens_details.cached_tokens` is the server's own word where it gives it.
        let detailed = format!(
            r#"{{"choices":[],"usage":{{"prompt_tokens":412,"completion_tokens":37,"prompt_tokens_details":{{"cached_tokens":400}}}},{timings}}}"#
        );
        assert_eq!(
            usage(parse_event(&detailed).unwrap().unwrap()).cache_read,
            400
        );
        // No usage (not asked for): the timings are the count.
        let alone = format!(
            r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}],{timings}}}"#
        );
        let deltas = parse_event(&alone).unwrap().unwrap();
        assert_eq!(deltas[0], Delta::Finish(Finish::Stop));
        let read = usage(deltas[1..].to_vec());
        assert_eq!((read.input, read.output, read.cache_read), (412, 37, 398));
    }
}
