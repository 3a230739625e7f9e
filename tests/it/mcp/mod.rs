//! The MCP servers a client passes in `session/new`, through the BUILT BINARY (`acp-bash serve
//! --model …` over pipes) with a fake model provider on loopback that calls their tools, and a
//! real MCP stdio server (`fixtures/mcp/server.py`, Python's standard library only): the tool
//! call card, the result reaching the model, the server confined like a command, a server that
//! fails, dies, never answers, prints garbage or floods, and no process left behind.

use std::path::{Path, PathBuf};

mod http;

use crate::support::acp::*;
use crate::support::fake_model::{openai, Answer, FakeModel};
use acp_bash::acp::client::{AcpClient, ClientProfile};
use agent_client_protocol::v1::schema::{
    EnvVariable, McpServer, McpServerStdio, NewSessionRequest, StopReason, ToolCallStatus, ToolKind,
};

const KEY: &str = "sk-test-mcp-6f1c0ffee-SECRET";
const SERVER: &str = include_str!("../fixtures/mcp/server.py");

/// The binary serving `openai:fake` at `fake`, plus `extra` flags.
fn model_client(fake: &FakeModel, extra: &[&str]) -> AcpClient {
    let base = format!("{}/v1", fake.base);
    let mut args = vec![
        "serve",
        "--no-history",
        "--log-level",
        "acp_bash=debug",
        "--model",
        "openai:fake",
        "--base-url",
        &base,
    ];
    args.extend_from_slice(extra);
    if !extra.contains(&"--sandbox") {
        args.extend_from_slice(&["--sandbox", "workspace"]);
    }
    AcpClient::new(binary(), args)
        .profile(ClientProfile::Zed)
        .env("XDG_CONFIG_HOME", "/nonexistent/acp-bash-tests")
        .env("OPENAI_API_KEY", KEY)
}

/// The test server written to `dir`.
fn server_script(dir: &Path) -> PathBuf {
    let path = dir.join("mcp-server.py");
    std::fs::write(&path, SERVER).unwrap();
    path
}

/// A stdio server `name` running `server.py MODE` (its process named `process` where python3
/// is not a shim).
fn stdio(name: &str, script: &Path, mode: &str, process: &str) -> McpServer {
    McpServer::Stdio(McpServerStdio::new(name, "/bin/bash").args(vec![
        "-c".into(),
        format!("exec -a {process} python3 {} {mode}", script.display()),
    ]))
}

/// Live processes (zombies excluded) whose command line holds `marker` (the server script's
/// path, unique to a test: python3 may be a shim that re-executes, so `exec -a` names are lost).
fn processes_with(marker: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                cmdline.contains(marker) && !cmdline.contains("exec -a")
            })
        })
        .filter(|pid| process_alive(*pid))
        .collect()
}

/// Waits until no process holding `marker` is left; false if one still runs after
/// [`hang_guard()`] (a hang guard, not a timing assertion).
async fn wait_until_none_with(marker: &str) -> bool {
    let deadline = tokio::time::Instant::now() + hang_guard();
    while !processes_with(marker).is_empty() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    true
}

/// A model call of `tool` with `arguments`.
fn calls(tool: &str, arguments: &str) -> Answer {
    openai::reply(&[], &[("call_1", tool, &[arguments])])
}

/// The tool results the model got in request `n`.
fn tool_results(fake: &FakeModel, n: usize) -> Vec<String> {
    fake.requests()[n].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The tool names offered in request `n`.
fn offered(fake: &FakeModel, n: usize) -> Vec<String> {
    fake.requests()[n].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The server's tool is offered beside bash under its prefixed name; the model's call is a
/// tool call card of its own (kind other, title naming server and tool, the arguments as
/// rawInput, the result as content), and the result reaches the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_calls_an_mcp_tool_through_its_own_card() {
    let fake = FakeModel::start(vec![
        calls("mcp__files__echo", "{\"text\": \"hi there\"}"),
        openai::reply(&["It echoed."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let script = server_script(&dir);
    let name = process_name(&dir);
    let client = model_client(&fake, &[]);
    let (turn, _) = converse_with(client, "an MCP call", async |mut c| {
        let request = NewSessionRequest::new(&dir)
            .mcp_servers(vec![stdio("files", &script, "normal", &name)]);
        let session = c.new_session_with(request).await?;
        let turn = c.prompt(&session, "echo hi there").await?;
        let marker = script.display().to_string();
        assert!(
            !processes_with(&marker).is_empty(),
            "the server is not running"
        );
        Ok(turn)
    })
    .await;
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    let names = offered(&fake, 0);
    for expected in ["bash", "mcp__files__echo", "mcp__files__read_file"] {
        assert!(names.iter().any(|n| n == expected), "{names:?}");
    }
    let call = tool_call(&turn.updates);
    assert_eq!(call.title, "files: echo");
    assert_eq!(call.kind, ToolKind::Other);
    assert_eq!(
        call.raw_input,
        Some(serde_json::json!({"text": "hi there"}))
    );
    let end = final_update(&turn.updates);
    assert_eq!(end.fields.status, Some(ToolCallStatus::Completed));
    assert_eq!(
        texts(end.fields.content.as_deref().unwrap()),
        vec!["echo: hi there".to_string()]
    );
    assert_eq!(tool_results(&fake, 1), vec!["echo: hi there".to_string()]);
    assert_eq!(agent_text(&turn.updates), "It echoed.");
    // The agent has exited: its server with it.
    assert!(
        wait_until_none_with(&script.display().to_string()).await,
        "the MCP server outlived the agent"
    );
}

/// The server runs like a command of the session: in its folder, with the scrubbed
/// environment (the model's key is not there) plus the variables the client gave it, and
/// behind the sandbox's masks (a `--mask`ed file reads as empty; a plain one beside it does not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_is_confined_like_a_command() {
    let (_tmp, dir) = temp_dir();
    // Outside the session folder and the temp dir (which a workspace command sees as its own).
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    let secret = outside.path().join("credentials");
    std::fs::write(&secret, "SECRET-VALUE\n").unwrap();
    let plain = outside.path().join("plain.txt");
    std::fs::write(&plain, "PLAIN-VALUE\n").unwrap();
    let read = |path: &Path| format!("{{\"path\": \"{}\"}}", path.display());
    let fake = FakeModel::start(vec![
        calls("mcp__s__read_file", &read(&secret)),
        calls("mcp__s__read_file", &read(&plain)),
        calls("mcp__s__env", "{\"name\": \"OPENAI_API_KEY\"}"),
        calls("mcp__s__env", "{\"name\": \"GIVEN_BY_CLIENT\"}"),
        calls("mcp__s__where", "{}"),
        openai::reply(&["Done."], &[]),
    ])
    .await;
    let script = server_script(&dir);
    let name = process_name(&dir);
    let mask = secret.display().to_string();
    let client = model_client(&fake, &["--mask", &mask]);
    let (turn, _) = converse_with(client, "a confined server", async |mut c| {
        let server = match stdio("s", &script, "normal", &name) {
            McpServer::Stdio(stdio) => McpServer::Stdio(
                stdio.env(vec![EnvVariable::new("GIVEN_BY_CLIENT", "given-value")]),
            ),
            other => other,
        };
        let request = NewSessionRequest::new(&dir).mcp_servers(vec![server]);
        let session = c.new_session_with(request).await?;
        c.prompt(&session, "read them").await
    })
    .await;
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    let last = tool_results(&fake, 5);
    assert_eq!(last.len(), 5, "{last:?}");
    // A masked file reads as empty, as it does for a command.
    assert_eq!(last[0], "(no output)", "{last:?}");
    assert!(!last.join("\n").contains("SECRET-VALUE"), "{last:?}");
    assert_eq!(last[1], "PLAIN-VALUE\n");
    assert_eq!(last[2], "None");
    assert_eq!(last[3], "'given-value'");
    assert_eq!(
        std::fs::canonicalize(&last[4]).unwrap(),
        std::fs::canonicalize(&dir).unwrap()
    );
}

/// A server runs in the session's mode: started in full mode it reads a `--mask`ed file; after
/// `session/set_mode` to workspace it is started anew, masked like a command; a change to the
/// same mode restarts nothing (its process stays the same).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mode_change_restarts_the_servers() {
    let (_tmp, dir) = temp_dir();
    let outside = tempfile::tempdir_in("/var/tmp").unwrap();
    let secret = outside.path().join("credentials");
    std::fs::write(&secret, "SECRET-VALUE\n").unwrap();
    let read = format!("{{\"path\": \"{}\"}}", secret.display());
    let fake = FakeModel::start(vec![
        calls("mcp__s__read_file", &read),
        openai::reply(&["Read."], &[]),
        calls("mcp__s__read_file", &read),
        openai::reply(&["Read again."], &[]),
    ])
    .await;
    let script = server_script(&dir);
    let name = process_name(&dir);
    let mask = secret.display().to_string();
    let client = model_client(&fake, &["--sandbox", "full", "--mask", &mask]);
    let marker = script.display().to_string();
    let (pids, _) = converse_with(client, "a mode change", async |mut c| {
        let request =
            NewSessionRequest::new(&dir).mcp_servers(vec![stdio("s", &script, "normal", &name)]);
        let session = c.new_session_with(request).await?;
        c.prompt(&session, "read it").await?;
        let before = processes_with(&marker);
        // The same mode: nothing restarts.
        c.connection()
            .send_request(
                agent_client_protocol::v1::schema::SetSessionModeRequest::new(
                    session.clone(),
                    "full",
                ),
            )
            .block_task()
            .await?;
        let same = processes_with(&marker);
        c.connection()
            .send_request(
                agent_client_protocol::v1::schema::SetSessionModeRequest::new(
                    session.clone(),
                    "workspace",
                ),
            )
            .block_task()
            .await?;
        c.prompt(&session, "read it again").await?;
        Ok((before, same))
    })
    .await;
    assert_eq!(
        pids.0, pids.1,
        "a change to the same mode restarted the server"
    );
    assert_eq!(
        tool_results(&fake, 1),
        ["SECRET-VALUE\n"],
        "full mode masks nothing"
    );
    let after = tool_results(&fake, 3);
    assert_eq!(after.last().unwrap(), "(no output)", "{after:?}");
    assert!(!after.last().unwrap().contains("SECRET-VALUE"));
    assert!(wait_until_none_with(&marker).await, "no server left behind");
}

/// A server that cannot start: the session works (the model is offered bash only), the user is
/// told once (with what the server said), not on the next prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_to_start_is_told_once() {
    let fake = FakeModel::start(vec![
        openai::reply(&["First."], &[]),
        openai::reply(&["Second."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let script = server_script(&dir);
    let name = process_name(&dir);
    let client = model_client(&fake, &[]);
    let (turns, _) = converse_with(client, "a failing server", async |mut c| {
        let request =
            NewSessionRequest::new(&dir).mcp_servers(vec![stdio("broken", &script, "fail", &name)]);
        let session = c.new_session_with(request).await?;
        let first = c.prompt(&session, "one").await?;
        let second = c.prompt(&session, "two").await?;
        Ok((first, second))
    })
    .await;
    let first = agent_text(&turns.0.updates);
    assert!(
        first.contains("MCP server \"broken\" is not available"),
        "{first}"
    );
    // What it printed on stderr before it went, always.
    assert!(
        first.contains("cannot start: no configuration found"),
        "{first}"
    );
    assert!(first.ends_with("First."), "{first}");
    assert_eq!(agent_text(&turns.1.updates), "Second.");
    assert_eq!(offered(&fake, 0), vec!["bash", "job_output", "job_kill"]);
}

/// A server that dies on a call: the model gets an error result, the user is told, and the
/// session goes on (the next prompt works, without the server's tools).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_gives_the_model_an_error() {
    let fake = FakeModel::start(vec![
        calls("mcp__d__echo", "{\"text\": \"x\"}"),
        openai::reply(&["It failed."], &[]),
        openai::reply(&["Still here."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let script = server_script(&dir);
    let name = process_name(&dir);
    let client = model_client(&fake, &[]);
    let (turns, _) = converse_with(client, "a dying server", async |mut c| {
        let request =
            NewSessionRequest::new(&dir).mcp_servers(vec![stdio("d", &script, "die", &name)]);
        let session = c.new_session_with(request).await?;
        let first = c.prompt(&session, "call it").await?;
        let second = c.prompt(&session, "again").await?;
        Ok((first, second))
    })
    .await;
    let results = tool_results(&fake, 1);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("MCP server \"d\""), "{results:?}");
    let end = final_update(&turns.0.updates);
    assert_eq!(end.fields.status, Some(ToolCallStatus::Failed));
    assert!(agent_text(&turns.1.updates).ends_with("Still here."));
    // The dead server's tool is no longer offered.
    assert!(offered(&fake, 0).contains(&"mcp__d__echo".to_string()));
    assert_eq!(offered(&fake, 2), vec!["bash", "job_output", "job_kill"]);
    assert!(wait_until_none_with(&script.display().to_string()).await);
}

/// A server that never answers a call: the call ends with an error after `--mcp-timeout`, and
/// the session keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_times_out() {
    let fake = FakeModel::start(vec![
        calls("mcp__h__echo", "{\"text\": \"x\"}"),
        openai::reply(&["Gave up."], &[]),
        calls("bash", "{\"command\": \"echo still-works\"}"),
        openai::reply(&["Done."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let script = server_script(&dir);
    let name = process_name(&dir);
    let client = model_client(&fake, &["--mcp-timeout", "2s"]);
    let (turns, _) = converse_with(client, "a silent server", async |mut c| {
        let request =
            NewSessionRequest::new(&dir).mcp_servers(vec![stdio("h", &script, "hang", &name)]);
        let session = c.new_session_with(request).await?;
        let first = c.prompt(&session, "call it").await?;
        let second = c.prompt(&session, "bash").await?;
        Ok((first, second))
    })
    .await;
    let results = tool_results(&fake, 1);
    assert!(results[0].contains("did not answer"), "{results:?}");
    assert_eq!(
        final_update(&turns.0.updates).fields.status,
        Some(ToolCallStatus::Failed)
    );
    assert_eq!(turns.1.stop_reason, StopReason::EndTurn);
    assert_eq!(card_output(&turns.1.updates), "still-works\n");
    assert!(wait_until_none_with(&script.display().to_string()).await);
}

/// Lines that are not JSON-RPC, an overlong line and a flood on stderr: the calls still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_floods_do_not_break_the_session() {
    for mode in ["garbage", "flood"] {
        let fake = FakeModel::start(vec![
            calls("mcp__g__echo", "{\"text\": \"through\"}"),
            openai::reply(&["Done."], &[]),
        ])
        .await;
        let (_tmp, dir) = temp_dir();
        let script = server_script(&dir);
        let name = process_name(&dir);
        let client = model_client(&fake, &[]);
        let (turn, _) = converse_with(client, mode, async |mut c| {
            let request =
                NewSessionRequest::new(&dir).mcp_servers(vec![stdio("g", &script, mode, &name)]);
            let session = c.new_session_with(request).await?;
            c.prompt(&session, "call it").await
        })
        .await;
        assert_eq!(turn.stop_reason, StopReason::EndTurn, "{mode}");
        assert_eq!(
            tool_results(&fake, 1),
            vec!["echo: through".to_string()],
            "{mode}"
        );
        assert!(
            wait_until_none_with(&script.display().to_string()).await,
            "{mode}"
        );
    }
}

/// Closing the session ends its server, while the agent runs on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_session_ends_its_server() {
    let fake = FakeModel::start(vec![openai::reply(&["Hi."], &[])]).await;
    let (_tmp, dir) = temp_dir();
    let script = server_script(&dir);
    let name = process_name(&dir);
    let client = model_client(&fake, &[]);
    let gone = converse_with(client, "close", async |mut c| {
        let request =
            NewSessionRequest::new(&dir).mcp_servers(vec![stdio("c", &script, "normal", &name)]);
        let session = c.new_session_with(request).await?;
        c.prompt(&session, "hi").await?;
        let marker = script.display().to_string();
        assert!(
            !processes_with(&marker).is_empty(),
            "the server is not running"
        );
        c.connection()
            .send_request(agent_client_protocol::v1::schema::CloseSessionRequest::new(
                session,
            ))
            .block_task()
            .await?;
        Ok(wait_until_none_with(&marker).await)
    })
    .await
    .0;
    assert!(gone, "the MCP server outlived its session");
}

/// An SSE server (MCP's deprecated transport) is not started, and the user is told why and
/// what to use instead; `initialize` does not advertise SSE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_server_is_refused_with_a_reason() {
    let fake = FakeModel::start(vec![openai::reply(&["Hi."], &[])]).await;
    let (_tmp, dir) = temp_dir();
    let client = model_client(&fake, &[]);
    let (turn, transcript) = converse_with(client, "sse", async |mut c| {
        let sse = McpServer::Sse(agent_client_protocol::v1::schema::McpServerSse::new(
            "old",
            "http://127.0.0.1:9/sse",
        ));
        let request = NewSessionRequest::new(&dir).mcp_servers(vec![sse]);
        let session = c.new_session_with(request).await?;
        c.prompt(&session, "hi").await
    })
    .await;
    let text = agent_text(&turn.updates);
    assert!(
        text.contains("MCP server \"old\" was not started"),
        "{text}"
    );
    assert!(text.contains("streamable HTTP endpoint"), "{text}");
    let wire = transcript.lines().join("\n");
    assert!(wire.contains("\"agentCapabilities\""), "{wire}");
    assert!(!wire.contains("\"sse\":true"), "{wire}");
}

/// A stdio server in workspace mode reaches the network as a command does: the allowed host
/// through acp-bash's proxy, not a host off the allowlist, and nothing directly (the loopback
/// server itself, bypassing the proxy). Root and nobody.
#[cfg(target_os = "linux")]
#[test]
fn a_workspace_server_reaches_allowed_hosts_only_through_the_proxy() {
    crate::support::sandbox::as_root_and_nobody(
        "mcp::a_workspace_server_reaches_allowed_hosts_only_through_the_proxy",
        || {
            if !crate::support::sandbox::require_namespaces() {
                return;
            }
            let server = crate::netproxy::http_server(None);
            let fetch =
                |url: &str, direct: bool| format!("{{\"url\": \"{url}\", \"direct\": {direct}}}");
            let direct = format!("http://{}/direct", server.addr);
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let fake = FakeModel::start(vec![
                    calls(
                        "mcp__n__fetch",
                        &fetch("http://registry.test/allowed", false),
                    ),
                    calls("mcp__n__fetch", &fetch("http://other.test/x", false)),
                    calls("mcp__n__fetch", &fetch(&direct, true)),
                    openai::reply(&["Done."], &[]),
                ])
                .await;
                // A folder an ordinary user's agent may use (as nobody too).
                let ws = tempfile::Builder::new()
                    .prefix("acpbash-mcp-net-")
                    .tempdir_in("/var/tmp")
                    .unwrap();
                {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(ws.path(), std::fs::Permissions::from_mode(0o777))
                        .unwrap();
                }
                let dir = ws.path().to_path_buf();
                let script = server_script(&dir);
                let name = process_name(&dir);
                let map = format!("registry.test={}", server.addr);
                let client = model_client(&fake, &["--map-host", &map]);
                let (turn, _) =
                    converse_with(client, "a server on the allowlist", async |mut c| {
                        let request = NewSessionRequest::new(&dir)
                            .mcp_servers(vec![stdio("n", &script, "normal", &name)]);
                        let session = c.new_session_with(request).await?;
                        c.prompt(&session, "fetch them").await
                    })
                    .await;
                assert_eq!(turn.stop_reason, StopReason::EndTurn);
                let results = tool_results(&fake, 3);
                assert_eq!(results.len(), 3, "{results:?}");
                assert_eq!(
                    results[0], "fetched: GET /allowed HTTP/1.1|host: registry.test\n",
                    "{results:?}"
                );
                assert!(results[1].starts_with("cannot fetch: "), "{results:?}");
                assert!(results[1].contains("403"), "{results:?}");
                assert!(results[2].starts_with("cannot fetch: "), "{results:?}");
                assert_eq!(server.seen(), ["GET /allowed HTTP/1.1"]);
                assert!(wait_until_none_with(&script.display().to_string()).await);
            });
        },
    );
}
