//! The provider-neutral interface: the conversation's messages, the tools, one request, the
//! stream of deltas a reply arrives in, and the errors a provider answers with, classified.
//!
//! Owns the vocabulary both providers ([`super::openai`], [`super::anthropic`]) translate to and
//! from, and [`ReplyBuilder`], which joins a stream of deltas into one reply (text, tool calls
//! joined by index, usage, finish reason). Must not touch: HTTP, the wire formats, ACP.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde_json::Value;

/// One message of a conversation, in the order the model saw them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Message {
    /// What the user said (or a command the user ran with `!`, and its output).
    User(String),
    /// Images the user gave with the prompt just before: sent in that user message (OpenAI
    /// `image_url` parts with `data:` URLs, Anthropic `image` blocks with a base64 source).
    Images(Vec<Image>),
    /// What the model answered: its text and the tool calls it made.
    Assistant {
        /// The text (may be empty).
        text: String,
        /// The tool calls, in order.
        tool_calls: Vec<ToolCall>,
        /// What the model reasoned first, in its provider's own form (sent back to the model
        /// that wrote it only; see [`Reasoning`]).
        reasoning: Option<Reasoning>,
    },
    /// The answer to one tool call.
    ToolResult {
        /// The call's id, as the model gave it.
        call_id: String,
        /// The result text.
        content: String,
        /// Whether the call failed to run (bad arguments, unknown tool).
        is_error: bool,
    },
}

/// An image the user gave (ACP `image` content).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Image {
    /// Its MIME type (`image/png`, `image/jpeg`, `image/gif`, `image/webp`).
    pub mime_type: String,
    /// Its bytes, in base64.
    pub data: String,
}

impl Image {
    /// An image of `mime_type` whose bytes are `data` (base64).
    pub fn new(mime_type: impl Into<String>, data: impl Into<String>) -> Self {
        Image {
            mime_type: mime_type.into(),
            data: data.into(),
        }
    }

    /// Its `data:` URL (OpenAI's `image_url`).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime_type, self.data)
    }
}

/// What stands in a conversation for `count` images once they are no longer sent.
pub fn images_not_sent(count: usize, why: &str) -> Message {
    let images = if count == 1 {
        "an image".to_string()
    } else {
        format!("{count} images")
    };
    Message::User(format!(
        "(The user gave {images} here; not sent to you: {why}.)"
    ))
}

impl Message {
    /// An assistant message of `text` and `tool_calls`, without reasoning.
    pub fn assistant(text: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Message::Assistant {
            text: text.into(),
            tool_calls,
            reasoning: None,
        }
    }
}

/// What a model reasoned before one answer, kept with that answer in the form its provider
/// wants it back:
///
/// - Anthropic: the `thinking` blocks with their `signature`, and `redacted_thinking` blocks,
///   unchanged and in order ([`Reasoning::blocks`]), sent back at the start of the message;
/// - DeepSeek (and the servers that stream `reasoning_content`): the text, sent back as
///   `reasoning_content` on a message with tool calls ([`Reasoning::content_field`]);
/// - OpenRouter: `reasoning_details`, the streamed pieces merged by index
///   ([`Reasoning::details`]);
/// - Gemini's OpenAI-compatible endpoint: each tool call's `extra_content` (its thought
///   signature), by call id ([`Reasoning::call_extras`]), and the signature of a reply's text
///   ([`Reasoning::message_extra`]); its thought summaries are only shown, never sent back.
///
/// It goes back only to the model that wrote it ([`Reasoning::origin`]): a session that
/// switches model drops it ([`drop_foreign_reasoning`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reasoning {
    /// The model that wrote it, `PROVIDER:NAME`.
    pub origin: String,
    /// The thoughts as text, as they were shown.
    pub text: String,
    /// Whether the server streamed the text as `reasoning_content` (sent back so).
    pub content_field: bool,
    /// Anthropic's `thinking` / `redacted_thinking` blocks, whole.
    pub blocks: Vec<Value>,
    /// OpenRouter's `reasoning_details`.
    pub details: Vec<Value>,
    /// Gemini's `extra_content` of each tool call, by the call's id.
    pub call_extras: Vec<(String, Value)>,
    /// Gemini's `extra_content` of the reply itself (the thought signature it streams beside
    /// the text, not on a call): `{"google": {"thought_signature": …}}`, sent back on the
    /// assistant message.
    pub message_extra: Option<Value>,
}

impl Reasoning {
    /// The `extra_content` of call `id`, if the provider sent one.
    pub fn call_extra(&self, id: &str) -> Option<&Value> {
        self.call_extras
            .iter()
            .find(|(call, _)| call == id)
            .map(|(_, extra)| extra)
    }
}

/// Removes the reasoning that `origin` (`PROVIDER:NAME`) did not write: it must never reach
/// another model (a signature of one provider is an error at the next, and thoughts are the
/// provider's). Returns how many messages lost theirs.
pub fn drop_foreign_reasoning(messages: &mut [Message], origin: &str) -> usize {
    let mut dropped = 0;
    for message in messages {
        if let Message::Assistant { reasoning, .. } = message {
            if reasoning.as_ref().is_some_and(|r| r.origin != origin) {
                *reasoning = None;
                dropped += 1;
            }
        }
    }
    dropped
}

/// How hard a reasoning model thinks (the session's `reasoning` option): OpenAI-compatible
/// `reasoning_effort`, Anthropic's extended thinking with a budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Effort {
    /// Little.
    Low,
    /// Some.
    Medium,
    /// Much.
    High,
}

impl Effort {
    /// Every level, least first.
    pub const ALL: [Effort; 3] = [Effort::Low, Effort::Medium, Effort::High];

    /// `low`, `medium`, `high` (OpenAI's `reasoning_effort` values).
    pub fn id(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }

    /// The level whose [`Effort::id`] is `id`.
    pub fn parse(id: &str) -> Option<Effort> {
        Effort::ALL.into_iter().find(|effort| effort.id() == id)
    }

    /// Anthropic's `thinking.budget_tokens` for this level (at least 1024, the API's floor).
    pub fn thinking_budget(self) -> u32 {
        match self {
            Effort::Low => 2048,
            Effort::Medium => 8192,
            Effort::High => 16384,
        }
    }
}

/// A tool call as the model made it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCall {
    /// The provider's id of the call, answered with the result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text, joined from the pieces the stream carried.
    pub arguments: String,
}

impl ToolCall {
    /// A call `id` of tool `name` with `arguments` (JSON text).
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema of its arguments object.
    pub parameters: Value,
}

/// One request to a model: everything a provider needs to build its body.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ModelRequest<'a> {
    /// The model's name at the provider.
    pub model: &'a str,
    /// The system prompt.
    pub system: &'a str,
    /// The conversation so far.
    pub messages: &'a [Message],
    /// The tools it may call.
    pub tools: &'a [ToolSpec],
    /// The most tokens a reply may have (Anthropic's thinking budget comes on top).
    pub max_tokens: u32,
    /// The reasoning effort the session chose; `None`: the model's default (Anthropic: no
    /// extended thinking).
    pub effort: Option<Effort>,
    /// The session's prompt-cache key ([`super::cache::cache_key`]): Anthropic gets its
    /// `cache_control` breakpoints, OpenAI-compatible servers a `prompt_cache_key`. `None`:
    /// no cache hints (as before caching was built; `--no-prompt-cache`).
    pub cache_key: Option<&'a str>,
}

impl<'a> ModelRequest<'a> {
    /// A request of `model` with `system`, `messages` and `tools`, at most `max_tokens` per
    /// reply; no reasoning effort, no cache hints.
    pub fn new(
        model: &'a str,
        system: &'a str,
        messages: &'a [Message],
        tools: &'a [ToolSpec],
        max_tokens: u32,
    ) -> Self {
        ModelRequest {
            model,
            system,
            messages,
            tools,
            max_tokens,
            effort: None,
            cache_key: None,
        }
    }

    /// Sets [`ModelRequest::cache_key`].
    pub fn cache_key(mut self, key: Option<&'a str>) -> Self {
        self.cache_key = key;
        self
    }
}

/// Why a reply ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Finish {
    /// The model finished its answer.
    Stop,
    /// It asked for tool calls.
    ToolCalls,
    /// It hit the token limit.
    Length,
    /// The provider filtered or the model refused.
    Refused,
    /// Another reason, as the provider named it.
    Other(String),
}

/// Tokens of one request and reply, and its cost where the provider reports one.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct TokenUsage {
    /// Tokens read (the prompt, the conversation).
    pub input: u64,
    /// Tokens written.
    pub output: u64,
    /// What this request cost, in USD, when the provider says (OpenRouter's `usage.cost`;
    /// OpenAI and Anthropic do not).
    pub cost: Option<f64>,
    /// Of `input`, the tokens read from the provider's prompt cache (Anthropic's
    /// `cache_read_input_tokens`, OpenAI's `prompt_tokens_details.cached_tokens`).
    pub cache_read: u64,
    /// Of `input`, the tokens written to the cache (Anthropic's
    /// `cache_creation_input_tokens`; OpenAI does not say).
    pub cache_write: u64,
}

/// A piece of a streamed reply.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Delta {
    /// A piece of the answer's text.
    Text(String),
    /// A piece of reasoning (thinking).
    Thinking(String),
    /// A piece of tool call `index`: its id and name come in the first piece, its arguments in
    /// pieces to be joined.
    ToolCall {
        /// Which call of the reply (the provider's index).
        index: usize,
        /// The call's id, in its first piece.
        id: Option<String>,
        /// The tool's name, in its first piece.
        name: Option<String>,
        /// A piece of the arguments' JSON text.
        arguments: String,
    },
    /// Token counts (a provider may send them in several pieces; later counts replace earlier
    /// non-zero ones).
    Usage(TokenUsage),
    /// Why the reply ended.
    Finish(Finish),
    /// Reasoning in the provider's own form, to be kept with the reply ([`Reasoning`]).
    Reasoning(ReasoningPiece),
}

/// A piece of [`Reasoning`] as a stream carries it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ReasoningPiece {
    /// The server streams the thoughts as `reasoning_content` (they come as
    /// [`Delta::Thinking`]).
    ContentField,
    /// A whole Anthropic `thinking` (with its signature) or `redacted_thinking` block.
    Block(Value),
    /// One OpenRouter `reasoning_details` item (a piece: items of the same `index` join).
    Detail(Value),
    /// The `extra_content` of tool call `index` (Gemini's thought signature).
    CallExtra {
        /// Which call of the reply.
        index: usize,
        /// The object, unchanged.
        extra: Value,
    },
    /// The `extra_content` a reply's delta carried with a thought signature (Gemini's
    /// signature of a text reply): `{"google": {"thought_signature": …}}`.
    MessageExtra(Value),
}

/// A whole reply, joined from its deltas.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Reply {
    /// The answer's text.
    pub text: String,
    /// The tool calls, in index order.
    pub tool_calls: Vec<ToolCall>,
    /// Token counts.
    pub usage: TokenUsage,
    /// Why it ended, when the provider said.
    pub finish: Option<Finish>,
    /// What the model reasoned, in the provider's form (its `origin` not set yet).
    pub reasoning: Option<Reasoning>,
}

/// Joins deltas into a [`Reply`].
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ReplyBuilder {
    text: String,
    calls: BTreeMap<usize, ToolCall>,
    usage: TokenUsage,
    finish: Option<Finish>,
    thinking: String,
    content_field: bool,
    blocks: Vec<Value>,
    details: Vec<Value>,
    extras: BTreeMap<usize, Value>,
    message_extra: Option<Value>,
}

impl ReplyBuilder {
    /// Adds one delta.
    pub fn push(&mut self, delta: &Delta) {
        match delta {
            Delta::Text(text) => self.text.push_str(text),
            Delta::Thinking(text) => self.thinking.push_str(text),
            Delta::Reasoning(piece) => match piece {
                ReasoningPiece::ContentField => self.content_field = true,
                ReasoningPiece::Block(block) => self.blocks.push(block.clone()),
                ReasoningPiece::Detail(detail) => merge_detail(&mut self.details, detail),
                ReasoningPiece::CallExtra { index, extra } => {
                    self.extras.insert(*index, extra.clone());
                }
                ReasoningPiece::MessageExtra(extra) => self.message_extra = Some(extra.clone()),
            },
            Delta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                let call = self
                    .calls
                    .entry(*index)
                    .or_insert_with(|| ToolCall::new("", "", ""));
                if let Some(id) = id {
                    call.id.clone_from(id);
                }
                if let Some(name) = name {
                    call.name.push_str(name);
                }
                call.arguments.push_str(arguments);
            }
            Delta::Usage(usage) => {
                if usage.input > 0 {
                    self.usage.input = usage.input;
                }
                if usage.output > 0 {
                    self.usage.output = usage.output;
                }
                if usage.cost.is_some() {
                    self.usage.cost = usage.cost;
                }
                if usage.cache_read > 0 {
                    self.usage.cache_read = usage.cache_read;
                }
                if usage.cache_write > 0 {
                    self.usage.cache_write = usage.cache_write;
                }
            }
            Delta::Finish(finish) => self.finish = Some(finish.clone()),
        }
    }

    /// Whether the provider said why the reply ended (a stream that ends after that, without
    /// its end marker, ended well).
    pub fn has_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// The reply so far. A call the provider gave no id gets one of [`new_call_id`].
    pub fn finish(self) -> Reply {
        let mut call_extras = Vec::new();
        let mut extras = self.extras;
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, mut call)| {
                if call.id.is_empty() {
                    call.id = new_call_id();
                }
                if let Some(extra) = extras.remove(&index) {
                    call_extras.push((call.id.clone(), extra));
                }
                call
            })
            .collect();
        let reasoning = (!self.thinking.is_empty()
            || self.content_field
            || !self.blocks.is_empty()
            || !self.details.is_empty()
            || !call_extras.is_empty()
            || self.message_extra.is_some())
        .then(|| Reasoning {
            origin: String::new(),
            text: self.thinking,
            content_field: self.content_field,
            blocks: self.blocks,
            details: self.details,
            call_extras,
            message_extra: self.message_extra,
        });
        Reply {
            text: self.text,
            tool_calls,
            usage: self.usage,
            finish: self.finish,
            reasoning,
        }
    }
}

/// Adds one streamed `reasoning_details` item: a piece of the same `index` and `type` as the
/// last item joins it (its text, summary or data appended; a signature or format set).
fn merge_detail(details: &mut Vec<Value>, piece: &Value) {
    if let Some(last) = details.last_mut() {
        let same = piece.get("index").is_some()
            && last.get("index") == piece.get("index")
            && last.get("type") == piece.get("type");
        if same {
            for (key, value) in piece.as_object().into_iter().flatten() {
                match (key.as_str(), value, last.get(key)) {
                    (
                        "text" | "summary" | "data",
                        Value::String(more),
                        Some(Value::String(so_far)),
                    ) => last[key] = Value::String(format!("{so_far}{more}")),
                    (_, Value::Null, _) => {}
                    _ => last[key] = value.clone(),
                }
            }
            return;
        }
    }
    details.push(piece.clone());
}

/// A tool-call id for a call the provider sent without one: `call_` and 24 hex digits, unique
/// across the steps and sessions of this process and (by its clock and pid) across processes.
/// Letters, digits and `_` only, which strict servers accept.
pub fn new_call_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static START: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let start = *START.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        nanos ^ (u64::from(std::process::id()) << 40)
    });
    let next = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("call_{start:016x}{:08x}", next as u32)
}

/// What went wrong with a request, classified by what the caller should do about it. Messages
/// never hold the key (the client removes it from whatever the provider echoed).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApiError {
    /// 401 or 403: the key was refused.
    Auth {
        /// The HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
    },
    /// 429: too many requests; try again after `retry_after` if it said.
    RateLimited {
        /// The provider's `Retry-After`.
        retry_after: Option<Duration>,
        /// What the provider said.
        message: String,
    },
    /// 5xx (and Anthropic's 529 or an `overloaded_error` event): try again.
    Server {
        /// The HTTP status (0 for an error event in the stream).
        status: u16,
        /// The provider's `Retry-After`.
        retry_after: Option<Duration>,
        /// What the provider said.
        message: String,
    },
    /// The connection failed or dropped before the reply ended.
    Connection(String),
    /// The conversation does not fit the model's context window.
    ContextOverflow(String),
    /// The account has no credit left (OpenAI's 429 `insufficient_quota`): final, not a rate
    /// limit.
    Quota {
        /// The HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
    },
    /// Any other refusal (400, 404, …): the request itself is wrong; retrying will not help.
    BadRequest {
        /// The HTTP status.
        status: u16,
        /// What the provider said.
        message: String,
    },
    /// The stream was not in the provider's format.
    Protocol(String),
}

impl ApiError {
    /// Whether trying again may succeed (429, 5xx, a dropped connection).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ApiError::RateLimited { .. } | ApiError::Server { .. } | ApiError::Connection(_)
        )
    }

    /// How long the provider asked us to wait before trying again.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::RateLimited { retry_after, .. } | ApiError::Server { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }

    /// Classifies an HTTP error answer by its `code` or `type` first (OpenAI's and llama.cpp's
    /// `error.code` / `error.type`, Anthropic's `error.type`), then by its status and message.
    pub fn from_answer(
        status: u16,
        retry_after: Option<Duration>,
        message: String,
        code: Option<&str>,
    ) -> Self {
        match code {
            Some("insufficient_quota") => ApiError::Quota { status, message },
            Some(code) if OVERFLOW_CODES.contains(&code) => ApiError::ContextOverflow(message),
            _ => Self::from_status(status, retry_after, message),
        }
    }

    /// Classifies an HTTP error answer: `status`, the `Retry-After` header, the body's message.
    pub fn from_status(status: u16, retry_after: Option<Duration>, message: String) -> Self {
        match status {
            401 | 403 => ApiError::Auth { status, message },
            429 => ApiError::RateLimited {
                retry_after,
                message,
            },
            500..=599 => ApiError::Server {
                status,
                retry_after,
                message,
            },
            _ if is_context_overflow(&message) => ApiError::ContextOverflow(message),
            _ => ApiError::BadRequest { status, message },
        }
    }

    /// The same error with every occurrence of `secret` replaced.
    pub fn redact(self, secret: &str) -> Self {
        self.map_messages(|text| {
            if secret.is_empty() {
                text.to_string()
            } else {
                text.replace(secret, "[redacted]")
            }
        })
    }

    /// The same error with its message passed through `clean`.
    pub fn map_messages(self, clean: impl Fn(&str) -> String) -> Self {
        let clean = |text: String| clean(&text);
        match self {
            ApiError::Auth { status, message } => ApiError::Auth {
                status,
                message: clean(message),
            },
            ApiError::RateLimited {
                retry_after,
                message,
            } => ApiError::RateLimited {
                retry_after,
                message: clean(message),
            },
            ApiError::Server {
                status,
                retry_after,
                message,
            } => ApiError::Server {
                status,
                retry_after,
                message: clean(message),
            },
            ApiError::Connection(message) => ApiError::Connection(clean(message)),
            ApiError::ContextOverflow(message) => ApiError::ContextOverflow(clean(message)),
            ApiError::BadRequest { status, message } => ApiError::BadRequest {
                status,
                message: clean(message),
            },
            ApiError::Quota { status, message } => ApiError::Quota {
                status,
                message: clean(message),
            },
            ApiError::Protocol(message) => ApiError::Protocol(clean(message)),
        }
    }
}

/// The error codes and types that say the conversation is too long: OpenAI's (and vLLM's,
/// LM Studio's where they give one) `context_length_exceeded`, llama.cpp's
/// `exceed_context_size_error`.
pub const OVERFLOW_CODES: &[&str] = &["context_length_exceeded", "exceed_context_size_error"];

/// Whether a provider's error message says the conversation is too long for the model (for
/// the servers that give no code): OpenAI and vLLM ("maximum context length"), Anthropic
/// ("prompt is too long"), llama.cpp ("exceeds the available context size"), LM Studio
/// ("context length of only"), Ollama ("prompt too long"; since its own runner: "the prompt
/// is longer than the context length", "the input length exceeds the context length").
pub fn is_context_overflow(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "context window",
        "prompt is too long",
        "prompt too long",
        "too many tokens",
        "exceeds the context",
        "exceeds the available context size",
        "context length of only",
        "longer than the model's context length",
        "longer than the context length",
        "exceeds the context length",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Auth { status, message } => write!(f, "HTTP {status}: {message}"),
            ApiError::RateLimited { message, .. } => write!(f, "HTTP 429: {message}"),
            ApiError::Server {
                status: 0, message, ..
            } => write!(f, "the provider reported an error: {message}"),
            ApiError::Server {
                status, message, ..
            } => write!(f, "HTTP {status}: {message}"),
            ApiError::Connection(message) => write!(f, "connection failed: {message}"),
            ApiError::ContextOverflow(message) => {
                write!(f, "the conversation is too long for the model: {message}")
            }
            ApiError::BadRequest { status, message } | ApiError::Quota { status, message } => {
                write!(f, "HTTP {status}: {message}")
            }
            ApiError::Protocol(message) => write!(f, "unreadable stream: {message}"),
        }
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_pieces_join_by_index_in_order() {
        let mut reply = ReplyBuilder::default();
        let piece =
            |index, id: Option<&str>, name: Option<&str>, arguments: &str| Delta::ToolCall {
                index,
                id: id.map(str::to_string),
                name: name.map(str::to_string),
                arguments: arguments.to_string(),
            };
        reply.push(&piece(1, Some("b"), Some("bash"), "{\"comm"));
        reply.push(&piece(0, Some("a"), Some("bash"), ""));
        reply.push(&piece(0, None, None, "{\"command\":\"ls\"}"));
        reply.push(&piece(1, None, None, "and\":\"pwd\"}"));
        reply.push(&Delta::Text("Hi".into()));
        reply.push(&Delta::Usage(TokenUsage {
            input: 10,
            output: 0,
            cost: None,
            cache_read: 4,
            cache_write: 0,
        }));
        reply.push(&Delta::Usage(TokenUsage {
            input: 0,
            output: 3,
            cost: Some(0.5),
            ..TokenUsage::default()
        }));
        let reply = reply.finish();
        assert_eq!(
            reply.tool_calls,
            [
                ToolCall::new("a", "bash", "{\"command\":\"ls\"}"),
                ToolCall::new("b", "bash", "{\"command\":\"pwd\"}"),
            ]
        );
        assert_eq!(
            reply.usage,
            TokenUsage {
                input: 10,
                output: 3,
                cost: Some(0.5),
                cache_read: 4,
                cache_write: 0,
            }
        );
        assert_eq!(reply.text, "Hi");
    }

    #[test]
    fn reasoning_in_every_form_is_kept_with_the_reply() {
        let mut reply = ReplyBuilder::default();
        reply.push(&Delta::Thinking("a".into()));
        reply.push(&Delta::Reasoning(ReasoningPiece::ContentField));
        reply.push(&Delta::Thinking("b".into()));
        let detail = |text: &str, signature: Value| {
            Delta::Reasoning(ReasoningPiece::Detail(serde_json::json!({
                "type": "reasoning.text", "index": 0, "format": "anthropic-claude-v1",
                "text": text, "signature": signature,
            })))
        };
        reply.push(&detail("x", Value::Null));
        reply.push(&detail("y", "sig".into()));
        reply.push(&Delta::ToolCall {
            index: 0,
            id: None,
            name: Some("bash".into()),
            arguments: "{}".into(),
        });
        reply.push(&Delta::Reasoning(ReasoningPiece::CallExtra {
            index: 0,
            extra: serde_json::json!({"google": {"thought_signature": "ts"}}),
        }));
        let reply = reply.finish();
        let reasoning = reply.reasoning.unwrap();
        assert_eq!(reasoning.text, "ab");
        assert!(reasoning.content_field);
        assert_eq!(
            reasoning.details,
            [serde_json::json!({"type": "reasoning.text", "index": 0,
                "format": "anthropic-claude-v1", "text": "xy", "signature": "sig"})]
        );
        let id = &reply.tool_calls[0].id;
        assert!(id.starts_with("call_") && id.len() == 29, "{id}");
        assert_eq!(
            reasoning.call_extra(id),
            Some(&serde_json::json!({"google": {"thought_signature": "ts"}}))
        );
        // Ids of calls without one never repeat.
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| new_call_id()).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids
            .iter()
            .all(|id| id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')));
    }

    #[test]
    fn a_switch_of_model_drops_the_other_models_reasoning() {
        let with = |origin: &str| Message::Assistant {
            text: "t".into(),
            tool_calls: Vec::new(),
            reasoning: Some(Reasoning {
                origin: origin.into(),
                text: "r".into(),
                ..Reasoning::default()
            }),
        };
        let mut messages = vec![
            with("anthropic:a"),
            with("openai:b"),
            Message::assistant("t", vec![]),
        ];
        assert_eq!(drop_foreign_reasoning(&mut messages, "openai:b"), 1);
        assert_eq!(messages[0], Message::assistant("t", vec![]));
        assert_eq!(messages[1], with("openai:b"));
    }

    #[test]
    fn codes_come_before_statuses() {
        let quota = ApiError::from_answer(429, None, "over".into(), Some("insufficient_quota"));
        assert!(matches!(quota, ApiError::Quota { status: 429, .. }));
        assert!(!quota.is_retryable());
        for code in OVERFLOW_CODES {
            assert!(matches!(
                ApiError::from_answer(400, None, "no".into(), Some(code)),
                ApiError::ContextOverflow(_)
            ));
        }
        for message in [
            "the request exceeds the available context size, try increasing it",
            "Trying to keep the first 40000 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens",
            "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens",
            "prompt is too long: 210000 tokens > 200000 maximum",
        ] {
            assert!(matches!(
                ApiError::from_answer(400, None, message.into(), Some("invalid_request_error")),
                ApiError::ContextOverflow(_)
            ), "{message}");
        }
        assert!(
            ApiError::from_answer(429, None, "slow".into(), Some("rate_limit_exceeded"))
                .is_retryable()
        );
    }

    #[test]
    fn statuses_are_classified() {
        let retry = Some(Duration::from_secs(2));
        assert!(matches!(
            ApiError::from_status(401, None, "no".into()),
            ApiError::Auth { status: 401, .. }
        ));
        assert_eq!(
            ApiError::from_status(429, retry, "slow".into()).retry_after(),
            retry
        );
        assert!(ApiError::from_status(529, None, "overloaded".into()).is_retryable());
        assert!(matches!(
            ApiError::from_status(
                400,
                None,
                "This model's maximum context length is 8192".into()
            ),
            ApiError::ContextOverflow(_)
        ));
        assert!(!ApiError::from_status(400, None, "bad".into()).is_retryable());
        let error = ApiError::from_status(401, None, "Incorrect API key sk-secret1".into());
        assert!(!error
            .redact("sk-secret1")
            .to_string()
            .contains("sk-secret1"));
    }
}
