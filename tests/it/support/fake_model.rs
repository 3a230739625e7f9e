//! A fake model provider on 127.0.0.1: a few dozen lines of HTTP/1.1 that record each request
//! and answer with scripted responses, streamed in each API's real SSE format (text deltas,
//! reasoning, tool calls whose arguments arrive in pieces, usage), or an error status with
//! `Retry-After`, or a stream that drops, or one that never ends (to test cancel). Never
//! reaches beyond loopback.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// 200 with these SSE events (each written and flushed on its own), then close.
    Sse(Vec<String>),
    /// 200 with these events, then the connection closes before the reply ended.
    Drop(Vec<String>),
    /// 200 with these events, then nothing: the stream stays open until the client leaves.
    Hang(Vec<String>),
    /// An error status with headers and a JSON body.
    Status(u16, Vec<(String, String)>, String),
}

/// A request the server got.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The request's path (`/v1/chat/completions`).
    pub path: String,
    /// Its headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Its JSON body.
    pub body: Value,
}

impl Recorded {
    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The server: answers in order, one per request; a request past the script gets a 500 that
/// says so (the loop then fails the turn, and the test sees it).
pub struct FakeModel {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    closed: tokio::sync::Mutex<mpsc::UnboundedReceiver<()>>,
    gets: Gets,
}

/// What the server answers to GETs (a model list, `/props`): by path, never from the script,
/// and never in [`FakeModel::requests`]; a path without an answer gets a 404.
#[derive(Clone, Default)]
struct Gets {
    answers: Arc<Mutex<Vec<(String, Answer)>>>,
    seen: Arc<Mutex<Vec<String>>>,
}

/// What a real server refuses: given a request's body, the error it answers with instead of
/// the next scripted answer (which then answers the next request).
pub type Refusal = Arc<dyn Fn(&Value) -> Option<Answer> + Send + Sync>;

/// What a metered server does to a scripted answer's events, given the request's body
/// (`start_metered`: the usage counted by a `cache_meter`).
pub type Rewrite = Arc<dyn Fn(&Value, Vec<String>) -> Vec<String> + Send + Sync>;

/// Which API's cache a metered server counts.
pub enum Meter {
    /// Anthropic's: `message_start`'s usage.
    Anthropic(Arc<Mutex<super::cache_meter::AnthropicMeter>>),
    /// OpenAI's: the last chunk's usage.
    OpenAi(Arc<Mutex<super::cache_meter::OpenAiMeter>>),
}

impl FakeModel {
    /// Starts a server with `answers`.
    pub async fn start(answers: Vec<Answer>) -> FakeModel {
        Self::start_refusing(answers, Arc::new(|_: &Value| None)).await
    }

    /// Starts a server with `answers` that first answers every request `refuse` refuses with
    /// its error, as the real server would.
    pub async fn start_refusing(answers: Vec<Answer>, refuse: Refusal) -> FakeModel {
        Self::start_with(answers, refuse, Arc::new(|_: &Value, events| events)).await
    }

    /// Starts a server with `answers` whose usage is what `meter` counts for each request: the
    /// cache reads and writes as the real API would report them.
    pub async fn start_metered(answers: Vec<Answer>, meter: Meter) -> FakeModel {
        let rewrite: Rewrite = Arc::new(move |body: &Value, events: Vec<String>| {
            let usage = match &meter {
                Meter::Anthropic(m) => {
                    super::cache_meter::AnthropicMeter::usage(&m.lock().unwrap().count(body))
                }
                Meter::OpenAi(m) => {
                    super::cache_meter::OpenAiMeter::usage(&m.lock().unwrap().count(body))
                }
            };
            events
                .into_iter()
                .map(|event| {
                    let Some((head, data)) = event.split_once("data: ") else {
                        return event;
                    };
                    let Ok(mut value) = serde_json::from_str::<Value>(data.trim()) else {
                        return event;
                    };
                    if value["type"] == "message_start" {
                        value["message"]["usage"] = usage.clone();
                    } else if value.get("usage").is_some_and(Value::is_object) {
                        value["usage"] = usage.clone();
                    } else {
                        return event;
                    }
                    format!("{head}data: {value}\n\n")
                })
                .collect()
        });
        Self::start_with(answers, Arc::new(|_: &Value| None), rewrite).await
    }

    /// Starts a server with `answers`, refusing what `refuse` refuses, each answer's events
    /// passed through `rewrite` first.
    pub async fn start_with(answers: Vec<Answer>, refuse: Refusal, rewrite: Rewrite) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let answers = Arc::new(Mutex::new(answers.into_iter()));
        let (closed_tx, closed) = mpsc::unbounded_channel();
        let recorded = requests.clone();
        let gets = Gets::default();
        let serve_gets = gets.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (recorded, answers, closed, refuse, rewrite, gets) = (
                    recorded.clone(),
                    answers.clone(),
                    closed_tx.clone(),
                    refuse.clone(),
                    rewrite.clone(),
                    serve_gets.clone(),
                );
                tokio::spawn(async move {
                    serve(socket, recorded, answers, closed, refuse, rewrite, gets).await;
                });
            }
        });
        FakeModel {
            base,
            requests,
            closed: tokio::sync::Mutex::new(closed),
            gets,
        }
    }

    /// Answers every `GET path` (the path with its query) with `answer` from now on.
    pub fn on_get(&self, path: &str, answer: Answer) {
        self.gets
            .answers
            .lock()
            .unwrap()
            .push((path.to_string(), answer));
    }

    /// The paths of the GETs so far, in order.
    pub fn gets(&self) -> Vec<String> {
        self.gets.seen.lock().unwrap().clone()
    }

    /// The requests so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits until the client has closed a `Hang` stream.
    pub async fn client_left(&self) {
        self.closed.lock().await.recv().await;
    }
}

async fn serve(
    mut socket: TcpStream,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    answers: Arc<Mutex<std::vec::IntoIter<Answer>>>,
    closed: mpsc::UnboundedSender<()>,
    refuse: Refusal,
    rewrite: Rewrite,
    gets: Gets,
) {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&data[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let path = request_line.split(' ').nth(1).unwrap_or("").to_string();
    if request_line.starts_with("GET ") {
        gets.seen.lock().unwrap().push(path.clone());
        let found = gets
            .answers
            .lock()
            .unwrap()
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, answer)| answer.clone());
        let answer = found.unwrap_or_else(|| {
            Answer::Status(
                404,
                Vec::new(),
                json!({"error": {"message": format!("no route {path}")}}).to_string(),
            )
        });
        write_answer(&mut socket, answer, &json!(null), &rewrite, &closed).await;
        return;
    }
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = data[head_end + 4..].to_vec();
    while body.len() < length {
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&buf[..n]),
        }
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let refused = refuse(&body);
    let request_body = body.clone();
    recorded.lock().unwrap().push(Recorded {
        path,
        headers,
        body,
    });
    let answer = refused
        .or_else(|| answers.lock().unwrap().next())
        .unwrap_or_else(|| {
            Answer::Status(
                500,
                Vec::new(),
                json!({"error": {"message": "the fake model has no scripted answer left"}})
                    .to_string(),
            )
        });
    write_answer(&mut socket, answer, &request_body, &rewrite, &closed).await;
}

/// Writes `answer` to `socket` and closes it.
async fn write_answer(
    socket: &mut TcpStream,
    answer: Answer,
    request_body: &Value,
    rewrite: &Rewrite,
    closed: &mpsc::UnboundedSender<()>,
) {
    let mut buf = [0u8; 8192];
    let sse_head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    match answer {
        Answer::Status(code, extra, body) => {
            let mut head = format!(
                "HTTP/1.1 {code} Error\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in extra {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
        }
        Answer::Sse(events) | Answer::Drop(events) => {
            let events = rewrite(request_body, events);
            let _ = socket.write_all(sse_head.as_bytes()).await;
            for event in events {
                let _ = socket.write_all(event.as_bytes()).await;
                let _ = socket.flush().await;
            }
        }
        Answer::Hang(events) => {
            let _ = socket.write_all(sse_head.as_bytes()).await;
            for event in events {
                let _ = socket.write_all(event.as_bytes()).await;
                let _ = socket.flush().await;
            }
            // Wait for the client to hang up (read returns 0 or fails).
            while let Ok(n) = socket.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
            let _ = closed.send(());
        }
    }
    let _ = socket.shutdown().await;
}

/// A tool call as a test scripts it: its id, its tool and its arguments' JSON text in pieces.
pub type Call<'a> = (&'a str, &'a str, &'a [&'a str]);

/// Streams in the OpenAI chat-completions format.
pub mod openai {
    use super::*;

    fn chunk(choices: Value) -> String {
        let chunk = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                           "model": "fake", "choices": choices});
        format!("data: {chunk}\n\n")
    }

    /// Reasoning, then text, then tool calls (arguments in pieces), the finish reason, usage
    /// and `[DONE]`.
    pub fn events(reasoning: &[&str], text: &[&str], calls: &[Call<'_>]) -> Vec<String> {
        let mut events = vec![chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]),
        )];
        for piece in reasoning {
            events.push(chunk(
                json!([{"index": 0, "delta": {"reasoning_content": piece}, "finish_reason": null}]),
            ));
        }
        for piece in text {
            events.push(chunk(
                json!([{"index": 0, "delta": {"content": piece}, "finish_reason": null}]),
            ));
        }
        for (index, (id, name, pieces)) in calls.iter().enumerate() {
            events.push(chunk(json!([{"index": 0, "delta": {"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}, "finish_reason": null}])));
            for piece in *pieces {
                events.push(chunk(json!([{"index": 0, "delta": {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}, "finish_reason": null}])));
            }
        }
        let finish = if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        events.push(chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
        ));
        let usage = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake",
                           "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}});
        events.push(format!("data: {usage}\n\n"));
        events.push("data: [DONE]\n\n".to_string());
        events
    }

    /// A whole reply.
    pub fn reply(text: &[&str], calls: &[Call<'_>]) -> Answer {
        Answer::Sse(events(&[], text, calls))
    }

    /// An error answer in OpenAI's shape.
    pub fn error(status: u16, headers: &[(&str, &str)], message: &str, code: &str) -> Answer {
        let body = json!({"error": {"message": message, "type": "error", "code": code}});
        let headers = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        Answer::Status(status, headers, body.to_string())
    }
}

/// Streams in the Anthropic messages format.
pub mod anthropic {
    use super::*;

    fn event(name: &str, data: Value) -> String {
        format!("event: {name}\ndata: {data}\n\n")
    }

    /// Thinking, then text, then tool uses (input in pieces), the stop reason, usage and
    /// `message_stop`.
    pub fn events(thinking: &[&str], text: &[&str], calls: &[Call<'_>]) -> Vec<String> {
        let mut events = vec![
            event(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "fake", "stop_reason": null, "usage": {"input_tokens": 100, "output_tokens": 1}}}),
            ),
            event("ping", json!({"type": "ping"})),
        ];
        let mut index = 0;
        if !thinking.is_empty() {
            events.push(event("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": ""}})));
            for piece in thinking {
                events.push(event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": piece}})));
            }
            let signed = signature(&thinking.concat());
            let (first, second) = signed.split_at(signed.len() / 2);
            for piece in [first, second] {
                events.push(event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": piece}})));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
        if !text.is_empty() {
            events.push(event("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
            for piece in text {
                events.push(event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}})));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
        for (id, name, pieces) in calls {
            events.push(event("content_block_start", json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})));
            for piece in *pieces {
                events.push(event("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}})));
            }
            events.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
            index += 1;
        }
        let stop = if calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        };
        events.push(event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 20}})));
        events.push(event("message_stop", json!({"type": "message_stop"})));
        events
    }

    /// A whole reply.
    pub fn reply(text: &[&str], calls: &[Call<'_>]) -> Answer {
        Answer::Sse(events(&[], text, calls))
    }

    /// The signature this server gives a thinking block of `thinking` (checked by
    /// `refuse::anthropic_thinking`): the text's bytes in hex.
    pub fn signature(thinking: &str) -> String {
        let hex: String = thinking.bytes().map(|b| format!("{b:02x}")).collect();
        format!("EqQBCkgI{hex}")
    }

    /// An error answer in Anthropic's shape.
    pub fn error(status: u16, headers: &[(&str, &str)], kind: &str, message: &str) -> Answer {
        let body = json!({"type": "error", "error": {"type": kind, "message": message}});
        let headers = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        Answer::Status(status, headers, body.to_string())
    }
}

/// A provider's response, `tests/it/fixtures/providers/PATH` (a body quoted from a bug report
/// or a stream written in a recorded shape: each file's source is in `SOURCES.md` there), as
/// its bytes.
pub fn recorded(path: &str) -> String {
    let path = format!(
        "{}/tests/it/fixtures/providers/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// An SSE stream fixture as the events the fake writes one by one (a file may leave out the
/// blank line after its last event, as recordings do; the server sent it).
pub fn recorded_events(path: &str) -> Vec<String> {
    recorded(path)
        .trim_end()
        .split("\n\n")
        .map(|event| format!("{event}\n\n"))
        .collect()
}

/// What the real servers refuse, as they word it (recorded bodies where one was found, see
/// `fixtures/providers/SOURCES.md`; `notes/2026-12-06-reasoning-message-model.md` gives the
/// others' sources).
pub mod refuse {
    use super::*;

    fn bad_request(body: Value) -> Answer {
        Answer::Status(400, Vec::new(), body.to_string())
    }

    /// OpenAI's reasoning models (o-series, gpt-5): `max_tokens` is refused, with the body
    /// OpenAI sent as a bug report quotes it (`openai/max_tokens_unsupported.json`).
    pub fn openai_reasoning_model(body: &Value) -> Option<Answer> {
        body.get("max_tokens")?;
        Some(Answer::Status(
            400,
            Vec::new(),
            recorded("openai/max_tokens_unsupported.json"),
        ))
    }

    /// Anthropic: a `max_tokens` above the model's own ceiling (`cap`) is refused, as the API
    /// words it ("max_tokens: 9999999 > 128000, which is the maximum allowed number of output
    /// tokens for claude-opus-4-8", quoted from the API in github.com/Effect-TS/effect#7129);
    /// and so is a thinking budget not below `max_tokens`.
    pub fn anthropic_output_cap(cap: u64) -> Refusal {
        Arc::new(move |body: &Value| {
            let max_tokens = body["max_tokens"].as_u64().unwrap_or(0);
            let model = body["model"].as_str().unwrap_or("");
            let message = if max_tokens > cap {
                format!("max_tokens: {max_tokens} > {cap}, which is the maximum allowed number of output tokens for {model}")
            } else if body["thinking"]["budget_tokens"]
                .as_u64()
                .is_some_and(|budget| budget >= max_tokens || budget < 1024)
            {
                "`max_tokens` must be greater than `thinking.budget_tokens`".to_string()
            } else {
                return None;
            };
            Some(bad_request(
                json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
            ))
        })
    }

    /// A gateway that does not know `stream_options`.
    pub fn no_stream_options(body: &Value) -> Option<Answer> {
        body.get("stream_options")?;
        Some(bad_request(json!({"error": {
            "message": "Unrecognized request argument supplied: stream_options",
            "type": "invalid_request_error", "param": null, "code": null}})))
    }

    fn assistants(body: &Value) -> impl Iterator<Item = (usize, &Value)> {
        body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(_, m)| m["role"] == "assistant")
    }

    /// DeepSeek's thinking mode: an assistant message with tool calls needs its
    /// `reasoning_content`.
    pub fn deepseek_thinking(body: &Value) -> Option<Answer> {
        let (index, _) = assistants(body)
            .find(|(_, m)| m.get("tool_calls").is_some() && !m["reasoning_content"].is_string())?;
        Some(bad_request(json!({"error": {
            "message": format!("Missing `reasoning_content` field in the assistant message at message index {index}. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"),
            "type": "invalid_request_error", "param": null, "code": "invalid_request_error"}})))
    }

    /// Anthropic with extended thinking: `max_tokens` above the budget; every thinking block
    /// signed by this server over its text, unchanged; and in a tool loop (the last user
    /// message holds tool results) the last assistant message starts with thinking.
    pub fn anthropic_thinking(body: &Value) -> Option<Answer> {
        let error = |message: String| {
            Some(bad_request(
                json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
            ))
        };
        let budget = body["thinking"]["budget_tokens"].as_u64();
        if let Some(budget) = budget {
            if body["max_tokens"].as_u64().unwrap_or(0) <= budget {
                return error("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size".into());
            }
        }
        let messages = body["messages"].as_array()?;
        for (i, message) in messages.iter().enumerate() {
            for (j, block) in message["content"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                if block["type"] == "thinking"
                    && block["signature"].as_str()
                        != Some(
                            anthropic::signature(block["thinking"].as_str().unwrap_or("")).as_str(),
                        )
                {
                    return error(format!(
                        "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                    ));
                }
            }
        }
        budget?;
        let in_loop = messages.last().is_some_and(|m| {
            m["role"] == "user"
                && m["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|b| b["type"] == "tool_result")
        });
        let (i, last) = messages
            .iter()
            .enumerate()
            .rev()
            .find(|(_, m)| m["role"] == "assistant")?;
        let first = &last["content"][0]["type"];
        if in_loop && first != "thinking" && first != "redacted_thinking" {
            return error(format!("messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking", first.as_str().unwrap_or("")));
        }
        None
    }
}
