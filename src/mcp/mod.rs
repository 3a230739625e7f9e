//! The MCP client: the tools of the MCP servers a client gave a session.
//!
//! Owns: starting each stdio server in the session's sandbox ([`Session::start_server`]: the
//! session's mode, masks, scrubbed environment plus the server's own variables, the session's
//! directory), the MCP handshake and tool list over its pipes (the `rmcp` crate,
//! `notes/2026-12-06-mcp-client.md`), calling a tool with a time bound, what went wrong with a
//! server (said once), and ending every server with the session ([`McpServers`] kills their
//! process groups when dropped). Must not touch: ACP (the ACP layer turns `mcpServers` into
//! [`ServerConfig`]s), the model's wire (the driver names the tools [`McpTool::qualified`]),
//! how a call is shown.
//!
//! A server that fails to start or dies leaves the session working: its tools are not offered
//! (or a call answers an error), and [`McpServers::take_news`] hands its failure to the turn
//! once, to tell the user.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use crate::exec::Session;

#[cfg(feature = "mcp-http")]
pub mod http;

/// Whether this build connects to HTTP MCP servers (streamable HTTP; the `mcp-http` feature).
pub const HTTP_SUPPORTED: bool = cfg!(feature = "mcp-http");

/// The default bound on a server's start (handshake and tool list) and on each call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The most bytes of a server's stderr kept for a failure's message.
const KEEP_STDERR: usize = 2048;

/// How long a failure's message waits for the server's last words: its stderr to its end, its
/// exit (a server that failed has usually exited, and its pipes are read to the end at once).
const LAST_WORDS: Duration = Duration::from_secs(2);

/// The most bytes of a tool's result handed on.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

/// One MCP server a client gave a session, without the protocol's types: a stdio server (a
/// program) or, with `url`, an HTTP one. Its `Debug` shows no header value and no URL
/// credentials.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The name the client gave it (its tools are `mcp__NAME__TOOL`).
    pub name: String,
    /// The program (a path, or a name looked up on the session's `PATH`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables it gets on top of a command's scrubbed environment.
    pub env: Vec<(String, String)>,
    /// An HTTP server's URL (its streamable HTTP endpoint); `None` for a stdio server.
    pub url: Option<String>,
    /// The headers of every request to an HTTP server (credentials, often).
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("ServerConfig");
        out.field("name", &self.name);
        match &self.url {
            Some(url) => out.field("url", &redact(url)).field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            ),
            None => out
                .field("command", &self.command)
                .field("args", &self.args)
                .field("env", &self.env.iter().map(|(n, _)| n).collect::<Vec<_>>()),
        };
        out.finish()
    }
}

/// `url` without credentials (where HTTP is not built, without more than its scheme).
fn redact(url: &str) -> String {
    #[cfg(feature = "mcp-http")]
    return http::redact_url(url);
    #[cfg(not(feature = "mcp-http"))]
    return format!("{}://…", url.split("://").next().unwrap_or("?"));
}

impl ServerConfig {
    /// The stdio server `name`, started as `command args…`.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: Vec<String>) -> Self {
        ServerConfig {
            name: name.into(),
            command: command.into(),
            args,
            env: Vec::new(),
            url: None,
            headers: Vec::new(),
        }
    }

    /// The HTTP server `name` at `url` (streamable HTTP), sent `headers` with every request.
    pub fn http(
        name: impl Into<String>,
        url: impl Into<String>,
        headers: Vec<(String, String)>,
    ) -> Self {
        ServerConfig {
            name: name.into(),
            command: String::new(),
            args: Vec::new(),
            env: Vec::new(),
            url: Some(url.into()),
            headers,
        }
    }

    /// Adds the variable `name=value`.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
}

/// One tool of a server, as the model is offered it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct McpTool {
    /// The server's name.
    pub server: String,
    /// The tool's name at the server.
    pub name: String,
    /// The name the model calls it by: `mcp__SERVER__TOOL`, each part reduced to
    /// `[A-Za-z0-9_-]` (what providers accept), at most 64 characters.
    pub qualified: String,
    /// What it does, as the server says.
    pub description: String,
    /// Its arguments' JSON Schema.
    pub input_schema: serde_json::Value,
}

/// What a tool call gave.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpResult {
    /// Its text (text content joined; other content named), bounded to [`MAX_RESULT_BYTES`].
    pub text: String,
    /// The server said the call failed, or it could not be made (then `text` says why).
    pub is_error: bool,
}

impl McpResult {
    /// A failed call: `text` says why.
    pub fn failed(text: impl Into<String>) -> Self {
        Self::error(text)
    }

    fn error(text: impl Into<String>) -> Self {
        McpResult {
            text: text.into(),
            is_error: true,
        }
    }
}

/// The name a model calls `tool` of `server` by.
pub fn qualified_name(server: &str, tool: &str) -> String {
    fn clean(part: &str) -> String {
        part.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
    let mut name = format!("mcp__{}__{}", clean(server), clean(tool));
    name.truncate(64);
    name
}

type Started = Result<Arc<Connected>, String>;

/// A running server.
struct Connected {
    service: RunningService<RoleClient, ()>,
    tools: Vec<McpTool>,
    /// Its stderr's last bytes.
    stderr: Arc<Mutex<String>>,
    /// Whether its process still runs (false once it exited: its tools are no longer offered).
    alive: tokio::sync::watch::Receiver<bool>,
    /// An HTTP server's last failure in the user's terms (what rmcp's error wraps).
    failure: Option<Box<dyn Fn() -> Option<String> + Send + Sync>>,
}

impl Connected {
    fn alive(&self) -> bool {
        *self.alive.borrow() && !self.service.is_transport_closed()
    }
}

struct Server {
    config: ServerConfig,
    started: Shared<BoxFuture<'static, Started>>,
    /// Stops the start and kills the process when the servers are dropped.
    cancel: CancellationToken,
}

/// The MCP servers of one session. Dropping it ends them (their process groups are killed).
#[non_exhaustive]
pub struct McpServers {
    servers: Vec<Server>,
    timeout: Duration,
    /// What the user has not been told yet.
    news: Arc<Mutex<Vec<String>>>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field(
                "servers",
                &self
                    .servers
                    .iter()
                    .map(|s| &s.config.name)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Drop for McpServers {
    fn drop(&mut self) {
        for server in &self.servers {
            server.cancel.cancel();
        }
    }
}

impl McpServers {
    /// No servers.
    pub fn none() -> Self {
        McpServers {
            servers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            news: Arc::default(),
        }
    }

    /// Starts each of `configs` on `session` in the background (each start is bounded by
    /// `timeout`, as is each call). Must be called inside a tokio runtime.
    pub fn start(session: &Session, configs: Vec<ServerConfig>, timeout: Duration) -> Self {
        let news: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut seen = std::collections::HashSet::new();
        let servers = configs
            .into_iter()
            .filter(|config| {
                let fresh = seen.insert(qualified_name(&config.name, ""));
                if !fresh {
                    news.lock().unwrap().push(format!(
                        "MCP server \"{}\" was not started: another server has the same name. \
                         Give each server its own name.",
                        config.name
                    ));
                }
                fresh
            })
            .map(|config| {
                let cancel = CancellationToken::new();
                let task = tokio::spawn(connect(
                    session.clone(),
                    config.clone(),
                    timeout,
                    cancel.clone(),
                    news.clone(),
                ));
                let name = config.name.clone();
                let started = async move {
                    task.await.unwrap_or_else(|error| {
                        Err(format!("MCP server \"{name}\" could not start: {error}"))
                    })
                }
                .boxed()
                .shared();
                Server {
                    config,
                    started,
                    cancel,
                }
            })
            .collect();
        McpServers {
            servers,
            timeout,
            news,
        }
    }

    /// The same servers started anew on `session`, in its sandbox mode now (a session whose
    /// mode changed). These end when the last handle to them is dropped (a turn under way
    /// keeps them until it ends).
    pub fn restarted(&self, session: &Session) -> Self {
        let configs = self.servers.iter().map(|s| s.config.clone()).collect();
        Self::start(session, configs, self.timeout)
    }

    /// Adds `sentence` to what the user is told (a server that was not started).
    pub fn note(&self, sentence: String) {
        self.news.lock().unwrap().push(sentence);
    }

    /// Whether the session was given any server.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The tools of every server that has started and still runs (waiting for the starts
    /// still under way).
    pub async fn tools(&self) -> Vec<McpTool> {
        let mut tools = Vec::new();
        for server in &self.servers {
            if let Ok(connected) = server.started.clone().await {
                if connected.alive() {
                    tools.extend(connected.tools.iter().cloned());
                }
            }
        }
        tools
    }

    /// What went wrong since the last time it was asked (a server that failed to start or
    /// died), each said once.
    pub fn take_news(&self) -> Vec<String> {
        std::mem::take(&mut *self.news.lock().unwrap())
    }

    /// Calls the tool the model named `qualified` with `arguments` (a JSON object), at most
    /// the servers' timeout; `cancel` stops waiting.
    pub async fn call(
        &self,
        qualified: &str,
        arguments: serde_json::Value,
        cancel: &CancellationToken,
    ) -> McpResult {
        let mut found = None;
        for server in &self.servers {
            if let Ok(connected) = server.started.clone().await {
                if let Some(tool) = connected.tools.iter().find(|t| t.qualified == qualified) {
                    found = Some((server, connected.clone(), tool.name.clone()));
                    break;
                }
            }
        }
        let Some((server, connected, name)) = found else {
            return McpResult::error(format!(
                "There is no tool {qualified}: its MCP server is not running. Use the tools you \
                 were offered."
            ));
        };
        let arguments = match arguments {
            serde_json::Value::Object(object) => object,
            serde_json::Value::Null => serde_json::Map::new(),
            other => {
                return McpResult::error(format!(
                    "The arguments of {qualified} must be a JSON object, not {other}."
                ))
            }
        };
        let params = CallToolRequestParams::new(name.clone()).with_arguments(arguments);
        let server_name = &server.config.name;
        let call = connected.service.call_tool(params);
        tokio::select! {
            result = call => match result {
                Ok(result) => result_of(result.content, result.is_error.unwrap_or(false)),
                Err(error) => {
                    if let Some(why) = connected.failure.as_ref().and_then(|failure| failure()) {
                        return McpResult::error(format!(
                            "The MCP server \"{server_name}\" failed the call of {name}: {why}."
                        ));
                    }
                    // A server that died: its exit first (its tools are then no longer
                    // offered), and its stderr with it, bounded.
                    let mut alive = connected.alive.clone();
                    let _ = tokio::time::timeout(LAST_WORDS, alive.wait_for(|alive| !*alive)).await;
                    let stderr = connected.stderr.lock().unwrap().clone();
                    McpResult::error(format!(
                        "The MCP server \"{server_name}\" failed the call of {name}: {error}{}",
                        stderr_tail(&stderr)
                    ))
                }
            },
            () = tokio::time::sleep(self.timeout) => McpResult::error(format!(
                "The MCP server \"{server_name}\" did not answer the call of {name} within {} \
                 s. Try again later or do without it.",
                self.timeout.as_secs()
            )),
            () = cancel.cancelled() => McpResult::error("Cancelled."),
        }
    }
}

/// A result's content as text for the model.
fn result_of(content: Vec<ContentBlock>, is_error: bool) -> McpResult {
    let mut text = String::new();
    for block in content {
        if !text.is_empty() {
            text.push('\n');
        }
        match block {
            ContentBlock::Text(t) => text.push_str(&t.text),
            ContentBlock::Image(image) => {
                text.push_str(&format!("[an image, {}]", image.mime_type));
            }
            ContentBlock::Audio(_) => text.push_str("[audio]"),
            ContentBlock::Resource(resource) => {
                text.push_str(&serde_json::to_string(&resource).unwrap_or_default());
            }
            ContentBlock::ResourceLink(link) => {
                text.push_str(&format!("[resource {}]", link.uri));
            }
            _ => text.push_str("[content acp-bash does not read]"),
        }
    }
    if text.len() > MAX_RESULT_BYTES {
        let mut end = MAX_RESULT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let dropped = text.len() - end;
        text.truncate(end);
        text.push_str(&format!("\n[{dropped} more bytes not shown]"));
    }
    McpResult { text, is_error }
}

fn stderr_tail(stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        String::new()
    } else {
        format!(". Its stderr ends: {stderr}")
    }
}

/// Starts and connects one server: the handshake and its tool list within `timeout`.
async fn connect(
    session: Session,
    config: ServerConfig,
    timeout: Duration,
    cancel: CancellationToken,
    news: Arc<Mutex<Vec<String>>>,
) -> Started {
    match config.url.clone() {
        Some(url) => connect_http(config, url, timeout, cancel, news).await,
        None => connect_stdio(session, config, timeout, cancel, news).await,
    }
}

/// The tools a server listed, as the model is offered them.
fn offered(name: &str, tools: Vec<rmcp::model::Tool>) -> Vec<McpTool> {
    tools
        .into_iter()
        .map(|tool| McpTool {
            server: name.to_string(),
            qualified: qualified_name(name, &tool.name),
            name: tool.name.to_string(),
            description: tool.description.map(|d| d.to_string()).unwrap_or_default(),
            input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
        })
        .collect()
}

/// Connects to an HTTP server (the agent's own connection, outside the sandbox): the
/// handshake and its tool list within `timeout`.
#[cfg(feature = "mcp-http")]
async fn connect_http(
    config: ServerConfig,
    url: String,
    timeout: Duration,
    cancel: CancellationToken,
    news: Arc<Mutex<Vec<String>>>,
) -> Started {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::StreamableHttpClientTransport;

    let name = config.name.clone();
    let fail = |why: String| {
        let message = format!(
            "MCP server \"{name}\" ({}) is not available: {why}.",
            http::redact_url(&url)
        );
        tracing::warn!("{message}");
        news.lock().unwrap().push(message.clone());
        Err(message)
    };
    let server = match http::HttpServer::new(&url, &config.headers) {
        Ok(server) => server,
        Err(why) => return fail(why),
    };
    // rmcp gets the URL without credentials: it only hands it back to `server`.
    let mut transport = StreamableHttpClientTransportConfig::with_uri(server.public_url());
    // A dropped stream is a failure to report, not to retry for minutes.
    transport.retry_config = Arc::new(http::NoRetry);
    let transport = StreamableHttpClientTransport::with_client(server.clone(), transport);
    let handshake = async {
        let service = ().serve(transport).await.map_err(|e| e.to_string())?;
        let tools = service.list_all_tools().await.map_err(|e| e.to_string())?;
        Ok::<_, String>((service, tools))
    };
    let (service, tools) = tokio::select! {
        done = handshake => match done {
            Ok(done) => done,
            Err(error) => {
                let why = server.take_failure().unwrap_or_else(|| format!("the MCP handshake failed ({error})"));
                return fail(why);
            }
        },
        () = tokio::time::sleep(timeout) => {
            return fail(format!("it did not finish its start within {} s", timeout.as_secs()));
        }
        () = cancel.cancelled() => return Err(format!("MCP server \"{name}\" was stopped")),
    };
    // No process to watch: the server is "alive" while its transport is.
    let (_, alive) = tokio::sync::watch::channel(true);
    let failure = server.clone();
    Ok(Arc::new(Connected {
        service,
        tools: offered(&name, tools),
        stderr: Arc::default(),
        alive,
        failure: Some(Box::new(move || failure.take_failure())),
    }))
}

/// Where HTTP is not built: said, not started.
#[cfg(not(feature = "mcp-http"))]
async fn connect_http(
    config: ServerConfig,
    _url: String,
    _timeout: Duration,
    _cancel: CancellationToken,
    news: Arc<Mutex<Vec<String>>>,
) -> Started {
    let message = format!(
        "MCP server \"{}\" was not started: this acp-bash was built without HTTP MCP servers \
         (the mcp-http feature). Configure it as a command, or use a build with it.",
        config.name
    );
    news.lock().unwrap().push(message.clone());
    Err(message)
}

/// Starts a stdio server in the session's sandbox: the handshake and its tool list within
/// `timeout`.
async fn connect_stdio(
    session: Session,
    config: ServerConfig,
    timeout: Duration,
    cancel: CancellationToken,
    news: Arc<Mutex<Vec<String>>>,
) -> Started {
    let name = config.name.clone();
    let fail = |why: String| {
        let message = format!("MCP server \"{name}\" is not available: {why}");
        tracing::warn!("{message}");
        news.lock().unwrap().push(message.clone());
        Err(message)
    };
    let (mut process, stdin, stdout, stderr) = match session
        .start_server(&config.command, &config.args, &config.env)
        .await
    {
        Ok(process) => process,
        Err(error) => return fail(format!("it could not be started ({error})")),
    };
    let kept = Arc::new(Mutex::new(String::new()));
    let mut stderr_read = tokio::spawn(keep_stderr(stderr, kept.clone(), name.clone()));
    let (alive_tx, alive) = tokio::sync::watch::channel(true);
    // The process belongs to this task: it ends when the servers are dropped (the token), or
    // when the runtime ends (the task is dropped); either way dropping it kills its group.
    let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let cancel = cancel.clone();
        let news = news.clone();
        let kept = kept.clone();
        let name = name.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let status = tokio::select! {
                status = process.wait() => status,
                () = cancel.cancelled() => return,
            };
            drop(process);
            alive_tx.send_replace(false);
            let how = match status {
                Ok(status) => status.to_string(),
                Err(error) => error.to_string(),
            };
            // Before its start is over, the start's own failure says it.
            if ready.load(std::sync::atomic::Ordering::SeqCst) {
                let tail = stderr_tail(&kept.lock().unwrap());
                let message = format!("MCP server \"{name}\" exited ({how}){tail}. Its tools are gone for this session.");
                tracing::warn!("{message}");
                news.lock().unwrap().push(message);
            }
        });
    }
    let handshake = async {
        let service = ().serve((stdout, stdin)).await.map_err(|e| e.to_string())?;
        let tools = service.list_all_tools().await.map_err(|e| e.to_string())?;
        Ok::<_, String>((service, tools))
    };
    let (service, tools) = tokio::select! {
        done = handshake => match done {
            Ok(done) => done,
            Err(error) => {
                // What it said before it went: its stderr read to the end (bounded).
                let _ = tokio::time::timeout(LAST_WORDS, &mut stderr_read).await;
                let tail = stderr_tail(&kept.lock().unwrap());
                return fail(format!("the MCP handshake failed ({error}){tail}"));
            }
        },
        () = tokio::time::sleep(timeout) => {
            return fail(format!("it did not finish its start within {} s", timeout.as_secs()));
        }
        () = cancel.cancelled() => return Err(format!("MCP server \"{name}\" was stopped")),
    };
    ready.store(true, std::sync::atomic::Ordering::SeqCst);
    Ok(Arc::new(Connected {
        service,
        tools: offered(&name, tools),
        stderr: kept,
        alive,
        failure: None,
    }))
}

/// Reads a server's stderr to its end, keeping its last [`KEEP_STDERR`] bytes and logging it.
async fn keep_stderr(
    mut stderr: tokio::net::unix::pipe::Receiver,
    kept: Arc<Mutex<String>>,
    name: String,
) {
    let mut buffer = vec![0u8; 8192];
    loop {
        match stderr.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let text = String::from_utf8_lossy(&buffer[..n]);
                tracing::debug!(server = %name, "MCP server stderr: {}", text.trim_end());
                let mut kept = kept.lock().unwrap();
                kept.push_str(&text);
                if kept.len() > KEEP_STDERR {
                    let mut cut = kept.len() - KEEP_STDERR;
                    while !kept.is_char_boundary(cut) {
                        cut += 1;
                    }
                    kept.drain(..cut);
                }
            }
        }
    }
}
