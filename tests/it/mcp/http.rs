//! HTTP MCP servers (`McpServer::Http`) through the BUILT BINARY: a real streamable-HTTP MCP
//! server on loopback (rmcp's own server side, `StreamableHttpService`, served by hyper in this
//! test process) whose tools a fake model calls. The agent connects itself (not from the
//! sandbox), sends the client's headers, never shows them or a URL's credentials, says what to
//! do when a server is unreachable, refuses the credentials or is not MCP, and bounds (and
//! cancels) a call of a server that dies or hangs.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use super::{calls, offered, tool_results, KEY};
use crate::support::acp::*;
use crate::support::fake_model::{openai, FakeModel};
use acp_bash::acp::client::{AcpClient, ClientProfile};
use agent_client_protocol::v1::schema::{
    HttpHeader, McpServer, McpServerHttp, NewSessionRequest, SessionUpdate, StopReason,
    ToolCallStatus, ToolKind,
};

const TOKEN: &str = "Bearer s3cret-http-token-7d1e";
const URL_PASSWORD: &str = "pa55-url-s3cret-91c2";
const URL_QUERY: &str = "query-s3cret-value-5ab0";

/// The tools: `echo` {text} answers at once, `hang` never.
#[derive(Clone)]
struct Tools;

fn schema(properties: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    serde_json::json!({"type": "object", "properties": properties})
        .as_object()
        .unwrap()
        .clone()
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new(
                "echo",
                "Echoes its text.",
                schema(serde_json::json!({"text": {"type": "string"}})),
            ),
            Tool::new("hang", "Never answers.", schema(serde_json::json!({}))),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "hang" {
            std::future::pending::<()>().await;
        }
        let text = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get("text"))
            .and_then(|text| text.as_str())
            .unwrap_or_default()
            .to_string();
        Ok(CallToolResult::success(vec![ContentBlock::text(format!("echo: {text}"))]).into())
    }
}

/// Each request's method and `authorization` header.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A streamable-HTTP MCP server on loopback: what each request carried, and a way to kill it.
struct McpHttp {
    port: u16,
    /// Each request's method and `authorization` header.
    seen: Seen,
    /// The accept loop and every connection.
    tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    stop: CancellationToken,
}

impl McpHttp {
    /// Serves the tools; with `require`, a request without that `authorization` gets a 401.
    async fn start(require: Option<&'static str>) -> McpHttp {
        let stop = CancellationToken::new();
        let mut config = StreamableHttpServerConfig::default();
        config.cancellation_token = stop.clone();
        let service: StreamableHttpService<Tools, LocalSessionManager> =
            StreamableHttpService::new(|| Ok(Tools), Default::default(), config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Seen = Arc::default();
        let tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let accept = {
            let seen = seen.clone();
            let tasks = tasks.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let service = service.clone();
                    let seen = seen.clone();
                    let handler =
                        hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                            let mut service = service.clone();
                            let auth = request
                                .headers()
                                .get("authorization")
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_string);
                            seen.lock()
                                .unwrap()
                                .push((request.method().to_string(), auth.clone()));
                            async move {
                                if require.is_some() && auth.as_deref() != require {
                                    let body: BoxBody<Bytes, Infallible> =
                                        Full::new(Bytes::from_static(b"missing or bad token"))
                                            .boxed();
                                    return Ok::<_, Infallible>(
                                        hyper::Response::builder()
                                            .status(401)
                                            .header("content-type", "text/plain")
                                            .body(body)
                                            .unwrap(),
                                    );
                                }
                                tower_service::Service::call(&mut service, request).await
                            }
                        });
                    let connection = tokio::spawn(async move {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), handler)
                            .await;
                    });
                    tasks.lock().unwrap().push(connection.abort_handle());
                }
            })
        };
        tasks.lock().unwrap().push(accept.abort_handle());
        McpHttp {
            port,
            seen,
            tasks,
            stop,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn seen(&self) -> Vec<(String, Option<String>)> {
        self.seen.lock().unwrap().clone()
    }

    /// The server dies: its listener and every connection close at once.
    fn kill(&self) {
        self.stop.cancel();
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

impl Drop for McpHttp {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The binary serving `openai:fake` at `fake`, logging everything at debug (so that a header
/// or a URL's credentials that reached any log would show), plus `extra` flags.
fn agent(fake: &FakeModel, extra: &[&str]) -> AcpClient {
    let base = format!("{}/v1", fake.base);
    let mut args = vec![
        "serve",
        "--no-history",
        "--log-level",
        "debug",
        "--model",
        "openai:fake",
        "--base-url",
        &base,
        "--sandbox",
        "workspace",
    ];
    args.extend_from_slice(extra);
    AcpClient::new(binary(), args)
        .profile(ClientProfile::Zed)
        .env("XDG_CONFIG_HOME", "/nonexistent/acp-bash-tests")
        .env("OPENAI_API_KEY", KEY)
}

fn http(name: &str, url: &str, headers: &[(&str, &str)]) -> McpServer {
    McpServer::Http(
        McpServerHttp::new(name, url).headers(
            headers
                .iter()
                .map(|(name, value)| HttpHeader::new(*name, *value))
                .collect(),
        ),
    )
}

/// The server's tools are offered beside bash and called as ACP tool calls of their own, with
/// the client's headers on every request; the URL's credentials and the headers' values are in
/// no line on the wire and no log line (debug, every crate), and `initialize` advertises HTTP
/// (not SSE). A server that cannot be reached is told with its URL redacted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_servers_tools_are_called_with_its_headers_and_no_secret_is_shown() {
    let server = McpHttp::start(Some(TOKEN)).await;
    let fake = FakeModel::start(vec![
        calls("mcp__web__echo", "{\"text\": \"over http\"}"),
        openai::reply(&["It echoed."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let url = format!(
        "http://mcpuser:{URL_PASSWORD}@127.0.0.1:{}/mcp?key={URL_QUERY}",
        server.port
    );
    let down = format!("http://mcpuser:{URL_PASSWORD}@127.0.0.1:1/mcp?key={URL_QUERY}");
    let (turn, transcript) = converse_with(agent(&fake, &[]), "an HTTP MCP call", async |mut c| {
        let request = NewSessionRequest::new(&dir).mcp_servers(vec![
            http("web", &url, &[("Authorization", TOKEN)]),
            http("down", &down, &[("Authorization", TOKEN)]),
        ]);
        let session = c.new_session_with(request).await?;
        c.prompt(&session, "echo over http").await
    })
    .await;
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    let names = offered(&fake, 0);
    assert!(names.iter().any(|n| n == "bash"), "{names:?}");
    assert!(names.iter().any(|n| n == "mcp__web__echo"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__down")),
        "{names:?}"
    );
    let call = tool_call(&turn.updates);
    assert_eq!(call.title, "web: echo");
    assert_eq!(call.kind, ToolKind::Other);
    assert_eq!(
        call.raw_input,
        Some(serde_json::json!({"text": "over http"}))
    );
    let end = final_update(&turn.updates);
    assert_eq!(end.fields.status, Some(ToolCallStatus::Completed));
    assert_eq!(
        texts(end.fields.content.as_deref().unwrap()),
        vec!["echo: over http".to_string()]
    );
    assert_eq!(tool_results(&fake, 1), vec!["echo: over http".to_string()]);
    // The handshake, the tool list and the call, each with the client's header.
    let seen = server.seen();
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(
        seen.iter().all(|(_, auth)| auth.as_deref() == Some(TOKEN)),
        "{seen:?}"
    );
    let text = agent_text(&turn.updates);
    assert!(
        text.contains(
            "MCP server \"down\" (http://redacted@127.0.0.1:1/mcp?key=redacted) is not \
             available: it cannot be reached"
        ),
        "{text}"
    );
    assert!(text.contains("check that it runs"), "{text}");
    let wire = transcript.lines().join("\n");
    assert!(
        wire.contains("\"mcpCapabilities\":{\"http\":true"),
        "{wire}"
    );
    assert!(!wire.contains("\"sse\":true"), "{wire}");
    let stderr = transcript.stderr().join("\n");
    assert!(stderr.contains("DEBUG"), "the log is not at debug level");
    for secret in [URL_PASSWORD, URL_QUERY, "s3cret-http-token"] {
        // The client's own request carries them; no line from the agent does.
        let from_agent: Vec<String> = transcript
            .lines()
            .into_iter()
            .filter(|line| !line.contains("\"method\":\"session/new\""))
            .filter(|line| line.contains(secret))
            .collect();
        assert!(
            from_agent.is_empty(),
            "{secret} on the wire: {from_agent:?}"
        );
        assert!(!stderr.contains(secret), "{secret} in the log:\n{stderr}");
    }
}

/// A server that refuses the credentials (401) and a URL that is no MCP server: each is told
/// once with what to do, their tools are not offered, and the session works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_or_foreign_http_server_is_told_with_what_to_do() {
    let locked = McpHttp::start(Some(TOKEN)).await;
    let plain = crate::netproxy::http_server(None);
    let fake = FakeModel::start(vec![
        openai::reply(&["First."], &[]),
        openai::reply(&["Second."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let plain_url = format!("http://{}/mcp", plain.addr);
    let (turns, _) = converse_with(agent(&fake, &[]), "refused", async |mut c| {
        let request = NewSessionRequest::new(&dir).mcp_servers(vec![
            http(
                "locked",
                &locked.url(),
                &[("Authorization", "Bearer wrong")],
            ),
            http("plain", &plain_url, &[]),
        ]);
        let session = c.new_session_with(request).await?;
        let first = c.prompt(&session, "one").await?;
        let second = c.prompt(&session, "two").await?;
        Ok((first, second))
    })
    .await;
    let first = agent_text(&turns.0.updates);
    assert!(
        first.contains("MCP server \"locked\"") && first.contains("HTTP 401"),
        "{first}"
    );
    assert!(first.contains("set the header it needs"), "{first}");
    assert!(
        first.contains("MCP server \"plain\"")
            && first.contains("does not answer as an MCP server"),
        "{first}"
    );
    assert!(first.ends_with("First."), "{first}");
    assert_eq!(agent_text(&turns.1.updates), "Second.");
    assert_eq!(offered(&fake, 0), vec!["bash", "job_output", "job_kill"]);
}

/// A server that dies mid-session: the next call of its tool answers the model an error that
/// says what happened and what to do, the card fails, and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_that_dies_mid_session_gives_the_model_an_error() {
    let server = McpHttp::start(None).await;
    let fake = FakeModel::start(vec![
        calls("mcp__d__echo", "{\"text\": \"alive\"}"),
        openai::reply(&["Fine."], &[]),
        calls("mcp__d__echo", "{\"text\": \"dead?\"}"),
        openai::reply(&["It failed."], &[]),
        calls("bash", "{\"command\": \"echo still-works\"}"),
        openai::reply(&["Done."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let url = server.url();
    let (turns, _) = converse_with(agent(&fake, &[]), "a dying HTTP server", async |mut c| {
        let request = NewSessionRequest::new(&dir).mcp_servers(vec![http("d", &url, &[])]);
        let session = c.new_session_with(request).await?;
        let first = c.prompt(&session, "call it").await?;
        server.kill();
        let second = c.prompt(&session, "again").await?;
        let third = c.prompt(&session, "bash").await?;
        Ok((first, second, third))
    })
    .await;
    assert_eq!(tool_results(&fake, 1), vec!["echo: alive".to_string()]);
    let results = tool_results(&fake, 3);
    let last = results.last().unwrap();
    assert!(last.contains("MCP server \"d\""), "{results:?}");
    assert!(last.contains("cannot be reached"), "{results:?}");
    assert!(last.contains("check that it runs"), "{results:?}");
    assert_eq!(
        final_update(&turns.1.updates).fields.status,
        Some(ToolCallStatus::Failed)
    );
    assert_eq!(turns.2.stop_reason, StopReason::EndTurn);
    assert_eq!(card_output(&turns.2.updates), "still-works\n");
}

/// A server that never answers a call: the call ends after `--mcp-timeout` with an error for
/// the model; and a `session/cancel` while such a call waits ends the turn as cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_call_that_hangs_is_bounded_and_cancellable() {
    let server = McpHttp::start(None).await;
    let url = server.url();
    // Bounded: a 2 s timeout.
    let fake = FakeModel::start(vec![
        calls("mcp__h__hang", "{}"),
        openai::reply(&["Gave up."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let (turn, _) = converse_with(
        agent(&fake, &["--mcp-timeout", "2s"]),
        "a hanging HTTP call",
        async |mut c| {
            let request = NewSessionRequest::new(&dir).mcp_servers(vec![http("h", &url, &[])]);
            let session = c.new_session_with(request).await?;
            c.prompt(&session, "call it").await
        },
    )
    .await;
    assert!(
        tool_results(&fake, 1)[0].contains("did not answer"),
        "{:?}",
        tool_results(&fake, 1)
    );
    assert_eq!(
        final_update(&turn.updates).fields.status,
        Some(ToolCallStatus::Failed)
    );
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    // Cancellable: a timeout beyond the tests' hang guard, cancelled once the call's card is
    // open (a cancel that did not stop the call would hang the test).
    let fake = FakeModel::start(vec![
        calls("mcp__h__hang", "{}"),
        openai::reply(&["Should not be asked."], &[]),
    ])
    .await;
    let patient = agent(&fake, &["--mcp-timeout", "3600s"]);
    let (stop, _) = converse_with(patient, "a cancelled HTTP call", async |mut c| {
        let request = NewSessionRequest::new(&dir).mcp_servers(vec![http("h", &url, &[])]);
        let session = c.new_session_with(request).await?;
        let prompt = c.start_prompt(&session, "call it");
        while let Some(update) = c.next_update().await {
            if matches!(update.update, SessionUpdate::ToolCall(_)) {
                break;
            }
        }
        c.cancel(&session)?;
        Ok(prompt.block_task().await?.stop_reason)
    })
    .await;
    assert_eq!(stop, StopReason::Cancelled);
    assert_eq!(
        fake.requests().len(),
        1,
        "the model was asked after the cancel"
    );
}
