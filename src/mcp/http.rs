//! HTTP MCP servers (MCP's streamable HTTP transport): rmcp's transport driven over the
//! crate's own reqwest 0.12 client (`notes/2026-12-06-mcp-http.md`).
//!
//! Owns: the HTTP requests of one server (the POST of each message, the GET of the server's
//! stream, the DELETE of its session), the headers the client gave (added to every request,
//! never handed to rmcp nor logged), the URL's credentials (never in a message or a log: rmcp
//! is given the URL without them, errors are stripped of URLs), bounds on what is read, and
//! errors in the user's terms (unreachable, refused credentials, not an MCP server). Must not
//! touch: the protocol's state (rmcp's worker), the tools (the parent module).
//!
//! The agent makes these connections itself, outside every sandbox: it reaches only the URLs
//! the client passed in `session/new`, as an editor would.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};

const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// The headers the transport owns: a client's value for one of them is dropped (ACP: "Agents
/// use the transport's values for them").
const OWNED_BY_TRANSPORT: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    SESSION_ID,
    LAST_EVENT_ID,
    "mcp-protocol-version",
];

/// The most bytes of an error answer's body quoted in a message.
const QUOTED_BODY: usize = 300;

/// `url` without its credentials: no `user:password@`, every query value replaced. For every
/// message, log and record that names an HTTP server.
pub fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            if !parsed.username().is_empty() || parsed.password().is_some() {
                let _ = parsed.set_username("redacted");
                let _ = parsed.set_password(None);
            }
            if parsed.query().is_some() {
                let pairs: Vec<String> = parsed
                    .query_pairs()
                    .map(|(name, _)| format!("{name}=redacted"))
                    .collect();
                parsed.set_query(Some(&pairs.join("&")));
            }
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => "(a URL that is not valid)".to_string(),
    }
}

/// Why an HTTP request to a server failed, in the user's terms. Holds no URL and no header.
#[derive(Debug)]
#[non_exhaustive]
pub enum HttpFailure {
    /// No HTTP answer: refused, a name that does not resolve, TLS, a dropped connection.
    Unreachable(String),
    /// An HTTP error status, with the start of its body.
    Status(u16, String),
    /// An answer that is not MCP's (another content type).
    NotMcp(String),
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpFailure::Unreachable(why) => write!(
                f,
                "it cannot be reached ({why}); check that it runs and that its URL is right"
            ),
            HttpFailure::Status(status @ (401 | 403), _) => write!(
                f,
                "it refused the request (HTTP {status}): its credentials are missing or wrong; \
                 set the header it needs (such as Authorization) in your editor's MCP settings"
            ),
            HttpFailure::Status(404, _) => write!(
                f,
                "it answered HTTP 404: check the URL's path (streamable HTTP servers often \
                 serve /mcp)"
            ),
            HttpFailure::Status(status, body) => {
                write!(f, "it answered HTTP {status}")?;
                if !body.is_empty() {
                    write!(f, ": {body}")?;
                }
                Ok(())
            }
            HttpFailure::NotMcp(what) => write!(
                f,
                "it does not answer as an MCP server ({what}); check the URL, which must be the \
                 server's streamable HTTP endpoint (the old SSE transport is not supported)"
            ),
        }
    }
}

impl std::error::Error for HttpFailure {}

type Failed = StreamableHttpError<HttpFailure>;

fn unreachable(error: reqwest::Error) -> Failed {
    // reqwest names the URL in its errors: never repeated.
    let error = error.without_url();
    let mut why = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(inner) = source {
        why = format!("{why}: {inner}");
        source = inner.source();
    }
    StreamableHttpError::Client(HttpFailure::Unreachable(why))
}

/// rmcp's policy for a dropped stream: never reopened (a call that was on it fails, and says so).
#[derive(Debug)]
#[non_exhaustive]
pub struct NoRetry;

impl rmcp::transport::common::client_side_sse::SseRetryPolicy for NoRetry {
    fn retry(&self, _times: usize) -> Option<Duration> {
        None
    }
}

/// The HTTP side of one server: its URL and the client's headers, on the agent's HTTP client.
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpServer {
    client: reqwest::Client,
    url: reqwest::Url,
    headers: Arc<HeaderMap>,
    /// The last request's failure, in the user's terms (rmcp wraps it in its own words).
    failure: Arc<std::sync::Mutex<Option<String>>>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("url", &redact_url(self.url.as_str()))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl HttpServer {
    /// The server at `url` with `headers` on every request. `Err` says what is wrong with
    /// them (never quoting a header's value).
    pub fn new(url: &str, headers: &[(String, String)]) -> Result<Self, String> {
        let parsed =
            reqwest::Url::parse(url).map_err(|error| format!("its URL is not valid ({error})"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("its URL is {}, not http or https", redact_url(url)));
        }
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("its header name \"{name}\" is not valid"))?;
            if OWNED_BY_TRANSPORT.contains(&header.as_str()) {
                tracing::debug!(header = %header, "a client's header the transport owns is dropped");
                continue;
            }
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                format!("the value of its header \"{name}\" is not valid (a line break or a control character)")
            })?;
            value.set_sensitive(true);
            map.append(header, value);
        }
        Ok(HttpServer {
            client: http_client()?,
            url: parsed,
            headers: Arc::new(map),
            failure: Arc::default(),
        })
    }

    /// What the last failed request met, in the user's terms, once.
    pub fn take_failure(&self) -> Option<String> {
        self.failure.lock().unwrap().take()
    }

    fn noted<T>(&self, result: Result<T, Failed>) -> Result<T, Failed> {
        if let Err(error) = &result {
            let said = match error {
                StreamableHttpError::Client(failure) => failure.to_string(),
                StreamableHttpError::UnexpectedContentType(kind) => HttpFailure::NotMcp(format!(
                    "its stream came as {}",
                    kind.as_deref().unwrap_or("no content type")
                ))
                .to_string(),
                StreamableHttpError::ResponseBodyTooLarge { .. } => error.to_string(),
                // The protocol's own turns (no stream offered, a session to renew): not
                // failures of the server.
                _ => return result,
            };
            *self.failure.lock().unwrap() = Some(said);
        }
        result
    }

    /// The URL rmcp is given (it only hands it back to this client): without credentials.
    pub fn public_url(&self) -> String {
        redact_url(self.url.as_str())
    }

    fn request(&self, method: reqwest::Method, session: Option<&str>) -> reqwest::RequestBuilder {
        let mut request = self
            .client
            .request(method, self.url.clone())
            .headers((*self.headers).clone());
        if let Some(session) = session {
            request = request.header(SESSION_ID, session);
        }
        request
    }

    async fn post(
        &self,
        message: ClientJsonRpcMessage,
        session: Option<Arc<str>>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Failed> {
        let body = serde_json::to_vec(&message)?;
        let answer = self
            .request(reqwest::Method::POST, session.as_deref())
            .header(ACCEPT, format!("{JSON}, {EVENT_STREAM}"))
            .header(CONTENT_TYPE, JSON)
            .body(body)
            .send()
            .await
            .map_err(unreachable)?;
        let status = answer.status();
        if status == reqwest::StatusCode::ACCEPTED || status == reqwest::StatusCode::NO_CONTENT {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == reqwest::StatusCode::NOT_FOUND && session.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let kind = content_type(answer.headers());
        let new_session = answer
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if !status.is_success() {
            if kind.as_deref() == Some(JSON) {
                // A JSON-RPC error may come with an error status: the protocol's answer.
                let body = bounded_body(answer, limits.max_json_response_size).await?;
                if let Ok(message @ rmcp::model::JsonRpcMessage::Error(_)) =
                    serde_json::from_slice::<ServerJsonRpcMessage>(&body)
                {
                    return Ok(StreamableHttpPostResponse::Json(message, new_session));
                }
                return Err(status_failure(status, &body));
            }
            let body = bounded_body(answer, limits.max_error_response_size)
                .await
                .unwrap_or_default();
            return Err(status_failure(status, &body));
        }
        let awaits_nothing = !matches!(message, ClientJsonRpcMessage::Request(_));
        match kind.as_deref() {
            Some(EVENT_STREAM) => Ok(StreamableHttpPostResponse::Sse(
                events(answer, limits.max_sse_event_size),
                new_session,
            )),
            Some(JSON) => {
                let body = bounded_body(answer, limits.max_json_response_size).await?;
                if body.is_empty() && awaits_nothing {
                    return Ok(StreamableHttpPostResponse::Accepted);
                }
                let message = serde_json::from_slice(&body).map_err(|error| {
                    StreamableHttpError::Client(HttpFailure::NotMcp(format!(
                        "its JSON is not an MCP message: {error}"
                    )))
                })?;
                Ok(StreamableHttpPostResponse::Json(message, new_session))
            }
            _ if awaits_nothing && answer.content_length() == Some(0) => {
                Ok(StreamableHttpPostResponse::Accepted)
            }
            other => Err(StreamableHttpError::Client(HttpFailure::NotMcp(format!(
                "it answered {}",
                other.map_or("without a content type".to_string(), |t| t.to_string())
            )))),
        }
    }
}

/// The agent's HTTP client for MCP servers (one per process). The system's proxy variables
/// apply, as for the model's requests.
fn http_client() -> Result<reqwest::Client, String> {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    if let Some(client) = CLIENT.get() {
        return Ok(client.clone());
    }
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .user_agent(concat!("acp-bash/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|error| format!("the HTTP client could not be set up ({error})"))?;
    Ok(CLIENT.get_or_init(|| client).clone())
}

/// The media type of an answer, lowercase, without parameters.
fn content_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(CONTENT_TYPE)?.to_str().ok()?;
    Some(
        value
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase(),
    )
}

fn status_failure(status: reqwest::StatusCode, body: &[u8]) -> Failed {
    let text = String::from_utf8_lossy(body);
    let mut text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.len() > QUOTED_BODY {
        let mut end = QUOTED_BODY;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    StreamableHttpError::Client(HttpFailure::Status(status.as_u16(), text))
}

/// An answer's body, at most `limit` bytes (more is an error).
async fn bounded_body(answer: reqwest::Response, limit: usize) -> Result<Vec<u8>, Failed> {
    let mut body = Vec::new();
    let mut chunks = answer.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(unreachable)?;
        if body.len() + chunk.len() > limit {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The server's error for an event longer than the bound.
#[derive(Debug)]
struct EventTooLong(usize);

impl std::fmt::Display for EventTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "an event of the server's stream is longer than {} bytes",
            self.0
        )
    }
}

impl std::error::Error for EventTooLong {}

/// The events of an SSE answer; an event longer than `limit` bytes ends the stream with an
/// error (the bytes are counted before parsing, so a server cannot make the agent hold more).
fn events(answer: reqwest::Response, limit: usize) -> BoxStream<'static, Result<Sse, SseError>> {
    let mut in_event = 0usize;
    let mut after_newline = false;
    let bytes = answer
        .bytes_stream()
        .map_err(|error| -> Box<dyn std::error::Error + Send + Sync> {
            Box::new(error.without_url())
        })
        .and_then(move |chunk| {
            for &byte in chunk.iter() {
                match byte {
                    b'\r' => {}
                    b'\n' if after_newline => {
                        in_event = 0;
                        after_newline = false;
                    }
                    b'\n' => after_newline = true,
                    _ => after_newline = false,
                }
                in_event += 1;
            }
            let result: Result<_, Box<dyn std::error::Error + Send + Sync>> = if in_event > limit {
                Err(Box::new(EventTooLong(limit)))
            } else {
                Ok(chunk)
            };
            std::future::ready(result)
        });
    SseStream::from_bytes_stream(bytes.map_err(BoxedError)).boxed()
}

/// A boxed error as an `Error` (what the SSE parser takes).
#[derive(Debug)]
struct BoxedError(Box<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for BoxedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for BoxedError {}

impl StreamableHttpClient for HttpServer {
    type Error = HttpFailure;

    async fn post_message(
        &self,
        _uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failed> {
        let done = self
            .post(message, session_id, StreamableHttpResponseLimits::default())
            .await;
        self.noted(done)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        _uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Failed> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        let done = self.post(message, session_id, limits).await;
        self.noted(done)
    }

    async fn post_message_with_response_limits(
        &self,
        _uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Failed> {
        let done = self.post(message, session_id, limits).await;
        self.noted(done)
    }

    async fn delete_session(
        &self,
        _uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failed> {
        let answer = self
            .request(reqwest::Method::DELETE, Some(&session_id))
            .send()
            .await
            .map_err(unreachable)?;
        let status = answer.status();
        if status.is_success() || status == reqwest::StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        Err(status_failure(status, &[]))
    }

    async fn get_stream(
        &self,
        _uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failed> {
        let done = self
            .stream(session_id, last_event_id, 16 * 1024 * 1024)
            .await;
        self.noted(done)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        _uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failed> {
        let done = self
            .stream(session_id, last_event_id, max_sse_event_size)
            .await;
        self.noted(done)
    }
}

impl HttpServer {
    async fn stream(
        &self,
        session: Option<Arc<str>>,
        last_event_id: Option<String>,
        limit: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failed> {
        let mut request = self
            .request(reqwest::Method::GET, session.as_deref())
            .header(ACCEPT, EVENT_STREAM);
        if let Some(last) = last_event_id {
            request = request.header(LAST_EVENT_ID, last);
        }
        let answer = request.send().await.map_err(unreachable)?;
        let status = answer.status();
        if status == reqwest::StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            return Err(status_failure(status, &[]));
        }
        match content_type(answer.headers()).as_deref() {
            Some(EVENT_STREAM) => Ok(events(answer, limit)),
            other => Err(StreamableHttpError::UnexpectedContentType(
                other.map(str::to_string),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_urls_credentials_are_redacted() {
        assert_eq!(
            redact_url("https://me:s3cret-token@mcp.example.com:8443/mcp?key=abc123&x=1#frag"),
            "https://redacted@mcp.example.com:8443/mcp?key=redacted&x=redacted"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:9/mcp"),
            "http://127.0.0.1:9/mcp"
        );
        assert!(!redact_url("not a url with s3cret").contains("s3cret"));
    }

    #[test]
    fn header_values_are_never_shown() {
        let server = HttpServer::new(
            "http://127.0.0.1:9/mcp",
            &[("Authorization".into(), "Bearer s3cret-token".into())],
        )
        .unwrap();
        assert!(!format!("{server:?}").contains("s3cret"));
        let error =
            HttpServer::new("http://x/", &[("X-Key".into(), "s3cret\nline".into())]).unwrap_err();
        assert!(!error.contains("s3cret"), "{error}");
    }
}
