//! stdin EOF while a command runs: the agent kills it and exits 0 promptly. Driven with raw
//! JSON-RPC lines over real pipes (no SDK client), exactly as an editor that quits would.

mod acp_support;
mod support;

use std::process::Stdio;
use std::time::Instant;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use acp_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_kills_running_commands_and_exits_zero() {
    let (_tmp, dir) = temp_dir();
    let name = process_name(&dir);
    let mut agent = Command::new(binary())
        .arg("--log-level=acp_bash=debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn acp-bash");
    let mut stdin = agent.stdin.take().unwrap();
    let mut stdout = BufReader::new(agent.stdout.take().unwrap()).lines();

    let mut send = async |value: Value| {
        let mut line = serde_json::to_string(&value).unwrap();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    };
    // Like any client, wait for each answer before the next request.
    let mut answer = async |id: u64| -> Value {
        guard("an answer", async {
            while let Some(line) = stdout.next_line().await.unwrap() {
                let value: Value =
                    serde_json::from_str(&line).expect("stdout carries only JSON-RPC");
                if value["id"] == id {
                    return value;
                }
            }
            panic!("stdout closed before answer {id}");
        })
        .await
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})).await;
    answer(1).await;
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                "params": {"cwd": dir, "mcpServers": []}}))
    .await;
    let session = answer(2).await["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    let script = format!("exec -a {name} sleep 120");
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": script}]}}),
    )
    .await;
    wait_for_process(&name).await;

    // The editor goes away.
    drop(stdin);
    let closed_at = Instant::now();
    let status = guard("exit after EOF", agent.wait()).await.unwrap();
    let took = closed_at.elapsed();
    eprintln!("stdin EOF -> exit: {took:?}");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(took.as_secs() < 10, "exit took {took:?}");
    assert!(
        wait_until_no_process(&name).await,
        "the command ({name}) outlived the agent"
    );
}

/// SIGTERM (an editor stopping the agent): every running command is cancelled, including what it
/// started in the background, before the agent exits with 128 + 15.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_kills_running_commands_and_their_children() {
    let (_tmp, dir) = temp_dir();
    let name = process_name(&dir);
    let mut agent = Command::new(binary())
        .args(["--sandbox", "full", "--log-level=acp_bash=debug"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn acp-bash");
    let mut stdin = agent.stdin.take().unwrap();
    let mut stdout = BufReader::new(agent.stdout.take().unwrap()).lines();
    let mut send = async |value: Value| {
        let mut line = serde_json::to_string(&value).unwrap();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    };
    let mut answer = async |id: u64| -> Value {
        guard("an answer", async {
            while let Some(line) = stdout.next_line().await.unwrap() {
                let value: Value = serde_json::from_str(&line).unwrap();
                if value["id"] == id {
                    return value;
                }
            }
            panic!("stdout closed before answer {id}");
        })
        .await
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})).await;
    answer(1).await;
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": dir, "mcpServers": []}})).await;
    let session = answer(2).await["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    // A background child (not the shell itself) that would outlive a shell killed alone.
    let script = format!("(exec -a {name} sleep 120) & wait");
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": script}]}}),
    )
    .await;
    wait_for_process(&name).await;

    let agent_pid = agent.id().unwrap() as i32;
    // SAFETY: kill has no memory-safety preconditions; the pid is our own child.
    unsafe { libc::kill(agent_pid, libc::SIGTERM) };
    let status = guard("exit after SIGTERM", agent.wait()).await.unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    assert!(
        wait_until_no_process(&name).await,
        "the background child ({name}) outlived the agent"
    );
}

/// The client stops reading (closes the agent's stdout) and the agent's next write fails with
/// EPIPE: that is the client going away, like EOF, so commands are killed and the exit is 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_is_the_client_going_away() {
    let (_tmp, dir) = temp_dir();
    let name = process_name(&dir);
    let mut agent = Command::new(binary())
        .args(["--sandbox", "full", "--log-level=acp_bash=debug"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn acp-bash");
    let mut stdin = agent.stdin.take().unwrap();
    let mut stdout = BufReader::new(agent.stdout.take().unwrap()).lines();
    let mut send = async |value: Value| {
        let mut line = serde_json::to_string(&value).unwrap();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    };
    let mut answer = async |id: u64| -> Value {
        guard("an answer", async {
            while let Some(line) = stdout.next_line().await.unwrap() {
                let value: Value = serde_json::from_str(&line).unwrap();
                if value["id"] == id {
                    return value;
                }
            }
            panic!("stdout closed before answer {id}");
        })
        .await
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})).await;
    answer(1).await;
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": dir, "mcpServers": []}})).await;
    let session = answer(2).await["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let script = format!("exec -a {name} sleep 120");
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": script}]}}),
    )
    .await;
    wait_for_process(&name).await;

    drop(stdout);
    // Something for the agent to answer: its write hits the closed pipe.
    send(json!({"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": dir, "mcpServers": []}})).await;
    let status = guard("exit after EPIPE", agent.wait()).await.unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        wait_until_no_process(&name).await,
        "the command ({name}) outlived the agent"
    );
}
