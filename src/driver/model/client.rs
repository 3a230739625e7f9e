//! One streamed model request over HTTP: the provider's endpoint and headers, the error
//! answers classified, the SSE stream read into [`Delta`]s as they arrive.
//!
//! Owns [`Provider`], [`ApiKey`] (whose `Debug` never shows the key) and [`ModelClient`], on
//! `reqwest` (rustls, no OpenSSL) and `eventsource-stream`
//! (`notes/2026-12-01-model-driver.md`). The client is built on the first request, so an agent
//! that never asks a model does no HTTP work. Cancelling stops reading the stream at once (the
//! connection is dropped). Must not touch: retries, the loop, ACP.

use std::fmt;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::api::{ApiError, Delta, ModelRequest, Reply, ReplyBuilder};
use super::extras::Extras;
use super::retry::parse_retry_after;
use super::{anthropic, openai};

/// Which API a model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI chat completions (and every OpenAI-compatible server).
    OpenAi,
    /// Anthropic messages.
    Anthropic,
}

impl Provider {
    /// `openai` or `anthropic`.
    pub fn id(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
        }
    }

    /// The base URL used when none is given.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com",
        }
    }

    /// The variable the base URL is read from (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`).
    pub fn base_url_env(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_BASE_URL",
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
        }
    }

    /// The variable the key is read from unless told otherwise.
    pub fn key_env(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
        }
    }
}

/// An API key and where it came from. `Debug` shows where only.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApiKey {
    value: String,
    /// The variable it was read from, or the file's path (named in error messages).
    pub source: String,
    /// Whether `source` is a key file written by `acp-bash login` (else a variable).
    pub from_file: bool,
}

impl ApiKey {
    /// The key `value`, read from the environment variable `source`.
    pub fn new(value: impl Into<String>, source: impl Into<String>) -> Self {
        ApiKey {
            value: value.into(),
            source: source.into(),
            from_file: false,
        }
    }

    /// The key `value`, read from the key file `path` (`acp-bash login`).
    pub fn from_file(value: impl Into<String>, path: &std::path::Path) -> Self {
        ApiKey {
            value: value.into(),
            source: path.display().to_string(),
            from_file: true,
        }
    }

    /// Where the key came from, for a message: `$NAME` or `the key file PATH`.
    pub fn origin(&self) -> String {
        if self.from_file {
            format!("the key file {} (written by `acp-bash login`)", self.source)
        } else {
            format!("${}", self.source)
        }
    }

    /// The key itself (for the request's header only).
    pub fn expose(&self) -> &str {
        &self.value
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey(from {})", self.source)
    }
}

/// Sends requests to one provider's base URL.
#[derive(Debug)]
#[non_exhaustive]
pub struct ModelClient {
    provider: Provider,
    base_url: String,
    /// What an OpenAI-compatible body carries, as this server takes it (changed once when
    /// its error asks for it, and kept for the next requests).
    openai: Mutex<openai::Options>,
    /// The user's headers and body fields (`--header`, `--extra-body`).
    extras: Extras,
}

impl ModelClient {
    /// A client of `provider` at `base_url` (nothing is built or connected yet).
    pub fn new(provider: Provider, base_url: impl Into<String>) -> Self {
        let base_url = base_url.into();
        ModelClient {
            provider,
            openai: Mutex::new(openai::Options::for_base(&base_url)),
            base_url,
            extras: Extras::default(),
        }
    }

    /// Adds `extras` (headers, body fields) to every request.
    pub fn with_extras(mut self, extras: Extras) -> Self {
        self.extras = extras;
        self
    }

    /// The OpenAI-compatible options the next request is sent with.
    pub fn openai_options(&self) -> openai::Options {
        *self.openai.lock().unwrap()
    }

    /// The provider.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The endpoint as messages and logs show it: without credentials ([`redact_url`]).
    pub fn shown_url(&self) -> String {
        redact_url(&self.url())
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> String {
        match self.provider {
            Provider::OpenAi => openai::url(&self.base_url),
            Provider::Anthropic => anthropic::url(&self.base_url),
        }
    }

    fn http(&self) -> Result<&reqwest::Client, ApiError> {
        // One HTTP client (and connection pool) for every model and model list of the process.
        static HTTP: OnceLock<reqwest::Client> = OnceLock::new();
        if let Some(client) = HTTP.get() {
            return Ok(client);
        }
        // The one place an HTTP client (and rustls) is set up: on the first model request.
        tracing::debug!(provider = self.provider.id(), "building the HTTP client");
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .read_timeout(Duration::from_secs(300))
            .user_agent(concat!("acp-bash/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| {
                ApiError::Connection(format!("cannot build the HTTP client: {error}"))
            })?;
        Ok(HTTP.get_or_init(|| client))
    }

    /// GETs `url` (a path of this provider's server: its model list, llama.cpp's `/props`)
    /// with the provider's auth headers when there is a `key`, and the user's headers; the
    /// answer's JSON. Errors never hold the key or a URL's credentials.
    pub async fn get_json(
        &self,
        url: &str,
        key: Option<&ApiKey>,
    ) -> Result<serde_json::Value, ApiError> {
        let http = self.http()?;
        let mut builder = http.get(url).header("accept", "application/json");
        if let Some(key) = key {
            builder = match self.provider {
                Provider::OpenAi => builder.bearer_auth(key.expose()),
                Provider::Anthropic => builder.header("x-api-key", key.expose()),
            };
        }
        if self.provider == Provider::Anthropic {
            builder = builder.header("anthropic-version", anthropic::VERSION);
        }
        let builder = self
            .extras
            .headers
            .iter()
            .fold(builder, |builder, (name, value)| {
                builder.header(name.as_str(), value.as_str())
            });
        // A server may echo the URL (`no route /v1/models?key=…`): its credentials go too.
        let secrets = url_secrets(url);
        let clean = |error: ApiError| {
            let error = match key {
                Some(key) => error.redact(key.expose()),
                None => error,
            };
            error.map_messages(|text| {
                let text = secrets.iter().fold(text.to_string(), |text, s| {
                    text.replace(s.as_str(), "[redacted]")
                });
                redact_urls_in(&text)
            })
        };
        let response = builder
            .send()
            .await
            .map_err(|error| clean(connection_error(error)))?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .map_err(|error| clean(connection_error(error)))?;
        if !(200..300).contains(&status) {
            let (message, code) = error_fields(&body);
            return Err(clean(ApiError::from_answer(
                status,
                None,
                message,
                code.as_deref(),
            )));
        }
        serde_json::from_str(&body)
            .map_err(|error| clean(ApiError::Protocol(format!("not JSON: {error}"))))
    }

    /// Sends `request` and reads its streamed reply, handing each delta to `on_delta` as it
    /// arrives. Cancelling `cancel` stops at once and returns what came so far. Errors never
    /// hold the key.
    pub async fn stream(
        &self,
        request: &ModelRequest<'_>,
        key: &ApiKey,
        on_delta: &mut (dyn FnMut(&Delta) + Send),
        cancel: &CancellationToken,
    ) -> Result<Reply, ApiError> {
        let mut adapted = false;
        loop {
            let options = self.openai_options();
            let error = match self
                .stream_inner(request, key, options, on_delta, cancel)
                .await
            {
                Ok(reply) => return Ok(reply),
                Err(error) => error.redact(key.expose()).map_messages(redact_urls_in),
            };
            // One retry when the server's refusal names a field it does not take (OpenAI's
            // reasoning models and `max_tokens`, gateways and `stream_options`).
            let adapt = match self.provider {
                Provider::OpenAi if !adapted => openai::adapt(options, &error),
                _ => None,
            };
            let Some(options) = adapt else {
                return Err(error);
            };
            tracing::warn!(
                "the server refused a field ({error}); trying once more with \
                 max_completion_tokens = {}, stream_options = {}",
                options.max_completion_tokens,
                options.stream_options
            );
            *self.openai.lock().unwrap() = options;
            adapted = true;
        }
    }

    async fn stream_inner(
        &self,
        request: &ModelRequest<'_>,
        key: &ApiKey,
        options: openai::Options,
        on_delta: &mut (dyn FnMut(&Delta) + Send),
        cancel: &CancellationToken,
    ) -> Result<Reply, ApiError> {
        let http = self.http()?;
        let builder = http
            .post(self.url())
            .header("accept", "text/event-stream")
            .header("content-type", "application/json");
        let (builder, mut body) = match self.provider {
            Provider::OpenAi => (
                builder.bearer_auth(key.expose()),
                openai::body(request, options),
            ),
            Provider::Anthropic => (
                builder
                    .header("x-api-key", key.expose())
                    .header("anthropic-version", anthropic::VERSION),
                anthropic::body(request),
            ),
        };
        self.extras.merge_into(&mut body);
        let builder = self
            .extras
            .headers
            .iter()
            .fold(builder, |builder, (name, value)| {
                builder.header(name.as_str(), value.as_str())
            })
            .body(body.to_string());
        let mut reply = ReplyBuilder::default();
        let response = tokio::select! {
            response = builder.send() => response.map_err(connection_error)?,
            () = cancel.cancelled() => return Ok(reply.finish()),
        };
        let status = response.status().as_u16();
        if !response.status().is_success() {
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|value| value.to_str().ok())
                .and_then(|value| parse_retry_after(value, std::time::SystemTime::now()));
            let body = tokio::select! {
                body = response.text() => body.unwrap_or_default(),
                () = cancel.cancelled() => return Ok(reply.finish()),
            };
            let (message, code) = error_fields(&body);
            let status = if status == 529 { 503 } else { status };
            return Err(ApiError::from_answer(
                status,
                retry_after,
                message,
                code.as_deref(),
            ));
        }
        let mut events = response.bytes_stream().eventsource();
        let mut reader = anthropic::EventReader::default();
        let mut chunks = openai::ChunkReader::default();
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                () = cancel.cancelled() => return Ok(reply.finish()),
            };
            let event = match event {
                // A server that ends the stream after the finish reason, without `[DONE]` or
                // `message_stop`, has said all it will.
                None if reply.has_finished() => return Ok(reply.finish()),
                None => {
                    return Err(ApiError::Connection(
                        "the stream ended before the reply did".into(),
                    ))
                }
                Some(Err(error)) => return Err(ApiError::Connection(error.to_string())),
                Some(Ok(event)) => event,
            };
            let deltas = match self.provider {
                Provider::OpenAi => chunks.read(&event.data)?,
                Provider::Anthropic => reader.read(&event.event, &event.data)?,
            };
            let Some(deltas) = deltas else {
                return Ok(reply.finish());
            };
            for delta in &deltas {
                reply.push(delta);
                on_delta(delta);
            }
        }
    }
}

/// The message of a provider's error body. Both forms put it at `error.message` (OpenAI's
/// `{error: {message}}`, Anthropic's `{type: "error", error: {message}}`); any other body is
/// its own message.
#[cfg(test)]
fn error_message(body: &str) -> String {
    error_fields(body).0
}

/// The message of a provider's error body and its code: `error.code` when it is a string
/// (OpenAI's `insufficient_quota`, `context_length_exceeded`), else `error.type` (Anthropic's,
/// llama.cpp's `exceed_context_size_error`). Gemini's OpenAI-compatible endpoint wraps the
/// error in a list; LM Studio's `error` is the message itself; vLLM before 0.10 answers
/// `{"object": "error", "message", "type", "code"}` without an `error` object. OpenRouter
/// answers a provider's refusal with "Provider returned error" and the provider's own body in
/// `error.metadata.raw`: its words (after the provider's name) and its code are the reason.
pub(super) fn error_fields(body: &str) -> (String, Option<String>) {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else {
        return (body.trim().to_string(), None);
    };
    let value = value
        .as_array()
        .and_then(|list| list.first())
        .unwrap_or(&value);
    let error = match &value["error"] {
        serde_json::Value::Null if value["object"] == "error" => value,
        error => error,
    };
    error_object_fields(error, body)
}

/// [`error_fields`] of an error object already parsed (`{"message", "code", "type",
/// "metadata"}`); `body` is the message where the object has none.
pub(super) fn error_object_fields(
    error: &serde_json::Value,
    body: &str,
) -> (String, Option<String>) {
    let message = match (error["message"].as_str(), error.as_str()) {
        (Some(message), _) | (None, Some(message)) => message.to_string(),
        (None, None) => body.trim().to_string(),
    };
    let code = error["code"]
        .as_str()
        .filter(|code| !code.is_empty())
        .or(error["type"].as_str())
        .map(str::to_string);
    let raw = match &error["metadata"]["raw"] {
        serde_json::Value::String(raw) => raw.trim().to_string(),
        serde_json::Value::Null => String::new(),
        raw => raw.to_string(),
    };
    if !raw.is_empty() {
        let (reason, reason_code) = error_fields(&raw);
        let from = error["metadata"]["provider_name"]
            .as_str()
            .unwrap_or("the provider");
        return (
            format!("{message} ({from}: {reason})"),
            reason_code.or(code),
        );
    }
    (message, code)
}

/// `url` without credentials: no `user:password@`, and every query value replaced
/// (`?key=…`), for messages, logs and records.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("[redacted]@{host}"),
        None => authority.to_string(),
    };
    let path = match path.split_once('?') {
        Some((path, query)) => {
            let (query, fragment) = query.split_once('#').unwrap_or((query, ""));
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) => format!("{name}=[redacted]"),
                    None => pair.to_string(),
                })
                .collect();
            let fragment = if fragment.is_empty() {
                String::new()
            } else {
                format!("#{fragment}")
            };
            format!("{path}?{}{fragment}", query.join("&"))
        }
        None => path.to_string(),
    };
    format!("{scheme}{authority}{path}")
}

/// The credentials `url` carries: its `user:password@` parts and its query values (of 4
/// characters or more; shorter ones are no secrets and would redact too much).
fn url_secrets(url: &str) -> Vec<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (authority, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let mut secrets: Vec<String> = Vec::new();
    if let Some((userinfo, _)) = authority.rsplit_once('@') {
        secrets.extend(userinfo.split(':').map(str::to_string));
    }
    if let Some((_, query)) = path.split_once('?') {
        let query = query.split('#').next().unwrap_or("");
        secrets.extend(
            query
                .split('&')
                .filter_map(|pair| pair.split_once('=').map(|(_, value)| value.to_string())),
        );
    }
    secrets.retain(|secret| secret.len() >= 4);
    secrets
}

/// `text` with every URL in it passed through [`redact_url`].
pub fn redact_urls_in(text: &str) -> String {
    if !text.contains("://") {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.contains("://") {
            out.push_str(&redact_url(word));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_whitespace() || matches!(c, '(' | ')' | '"' | '\'' | '<' | '>' | ',') {
            flush(&mut word, &mut out);
            out.push(c);
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn connection_error(error: reqwest::Error) -> ApiError {
    // reqwest's message names the URL, never a header.
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    ApiError::Connection(message)
}

#[cfg(test)]
mod tests {
    use super::{error_fields, error_message, redact_url, redact_urls_in};

    #[test]
    fn credentials_in_urls_are_redacted() {
        assert_eq!(
            redact_url("https://user:tok3n@gw.example/v1?key=s3cret&x=1#f"),
            "https://[redacted]@gw.example/v1?key=[redacted]&x=[redacted]#f"
        );
        assert_eq!(redact_url("http://127.0.0.1:8/v1"), "http://127.0.0.1:8/v1");
        let text = "error sending request for url (https://a:b@h/v1/chat?key=k): refused";
        let clean = redact_urls_in(text);
        assert!(!clean.contains("a:b") && !clean.contains("=k"), "{clean}");
        assert!(clean.ends_with("): refused"), "{clean}");
    }

    #[test]
    fn an_error_body_gives_its_message_in_either_providers_form() {
        let openai =
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        let anthropic =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_message(openai), "Incorrect API key provided");
        assert_eq!(error_message(anthropic), "Overloaded");
        assert_eq!(
            error_message("  upstream timed out\n"),
            "upstream timed out"
        );
        assert_eq!(error_message(r#"{"detail":"no"}"#), r#"{"detail":"no"}"#);
    }

    #[test]
    fn openrouter_gives_the_providers_own_words_and_code() {
        let raw = r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#;
        let body = serde_json::json!({"error": {"code": 400, "message": "Provider returned error",
            "metadata": {"raw": raw, "provider_name": "OpenAI"}}})
        .to_string();
        assert_eq!(
            error_fields(&body),
            (
                "Provider returned error (OpenAI: This model's maximum context length is 8192 tokens)"
                    .to_string(),
                Some("context_length_exceeded".to_string())
            )
        );
        let plain = r#"{"error":{"code":400,"message":"Provider returned error","metadata":{"raw":"upstream said no","provider_name":"Chutes"}}}"#;
        assert_eq!(
            error_message(plain),
            "Provider returned error (Chutes: upstream said no)"
        );
    }
}
