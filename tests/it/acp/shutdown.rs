//! How the agent ends while a command runs: stdin EOF, a closed stdout, SIGTERM. Each time every
//! running command (and what it started) is killed and the agent exits promptly. Driven with raw
//! JSON-RPC lines over real pipes (no SDK client), exactly as an editor that goes away would.

use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::support::acp::*;

/// The agent on raw pipes.
pub(super) struct RawAgent {
    pub(super) child: Child,
    pub(super) stdin: Option<ChildStdin>,
    stdout: Option<Lines<BufReader<ChildStdout>>>,
}

impl RawAgent {
    pub(super) fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(binary())
            .args(args)
            .arg("--log-level=acp_bash=debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn acp-bash");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().map(|out| BufReader::new(out).lines());
        RawAgent {
            child,
            stdin,
            stdout,
        }
    }

    pub(super) async fn send(&mut self, value: Value) {
        let mut line = serde_json::to_string(&value).unwrap();
        line.push('\n');
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// The next line the agent writes to stdout; `None` once stdout is closed.
    pub(super) async fn next_line(&mut self) -> Option<String> {
        let stdout = self.stdout.as_mut().expect("stdout is open");
        guard("a line from the agent", stdout.next_line())
            .await
            .unwrap()
    }

    /// [`Self::next_line`] waiting up to `limit` (a command that runs long without output).
    pub(super) async fn next_line_within(&mut self, limit: std::time::Duration) -> Option<String> {
        let stdout = self.stdout.as_mut().expect("stdout is open");
        tokio::time::timeout(limit, stdout.next_line())
            .await
            .unwrap_or_else(|_| panic!("no line from the agent within {limit:?}"))
            .unwrap()
    }

    /// Reads stdout until the answer to request `id`; every line must be JSON-RPC.
    pub(super) async fn answer(&mut self, id: u64) -> Value {
        let stdout = self.stdout.as_mut().expect("stdout is open");
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
    }

    /// initialize, session/new in `dir`, then a prompt running `script` (not waited for). Like any
    /// client, it waits for each answer before the next request. Returns the session's id.
    pub(super) async fn start(&mut self, dir: &Path, script: &str) -> String {
        self.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
            .await;
        self.answer(1).await;
        self.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                         "params": {"cwd": dir, "mcpServers": []}}))
            .await;
        let session = self.answer(2).await["result"]["sessionId"]
            .as_str()
            .expect("a session id")
            .to_string();
        self.send(
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": session, "prompt": [{"type": "text", "text": script}]}}),
        )
        .await;
        session
    }

    pub(super) async fn wait(&mut self, what: &str) -> std::process::ExitStatus {
        guard(what, self.child.wait()).await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_kills_running_commands_and_exits_zero() {
    let (_tmp, dir) = temp_dir();
    let name = process_name(&dir);
    // The default sandbox mode: what an editor runs.
    let mut agent = RawAgent::spawn(&[]);
    agent
        .start(&dir, &format!("exec -a {name} sleep 120"))
        .await;
    wait_for_process(&name).await;

    // The editor goes away.
    agent.stdin = None;
    let closed_at = Instant::now();
    let status = agent.wait("exit after EOF").await;
    let took = closed_at.elapsed();
    eprintln!("stdin EOF -> exit: {took:?}");
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(took.as_secs() < 10, "exit took {took:?}");
    assert!(
        wait_until_no_process(&name).await,
        "the command ({name}) outlived the agent"
    );
}

/// The client stops reading (closes the agent's stdout) and the agent's next write fails with
/// EPIPE: that is the client going away, like EOF, so commands are killed and the exit is 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_is_the_client_going_away() {
    let (_tmp, dir) = temp_dir();
    let name = process_name(&dir);
    let mut agent = RawAgent::spawn(&["--sandbox", "full"]);
    agent
        .start(&dir, &format!("exec -a {name} sleep 120"))
        .await;
    wait_for_process(&name).await;

    agent.stdout = None;
    // Something for the agent to answer: its write hits the closed pipe.
    agent
        .send(json!({"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {"cwd": dir, "mcpServers": []}}))
        .await;
    let status = agent.wait("exit after EPIPE").await;
    assert_eq!(status.code(), Some(0), "{status:?}");
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
    let mut agent = RawAgent::spawn(&["--sandbox", "full"]);
    // A background child (not the shell itself) that would outlive a shell killed alone.
    agent
        .start(&dir, &format!("(exec -a {name} sleep 120) & wait"))
        .await;
    wait_for_process(&name).await;

    let agent_pid = agent.child.id().unwrap() as i32;
    // SAFETY: kill has no memory-safety preconditions; the pid is our own child.
    unsafe { libc::kill(agent_pid, libc::SIGTERM) };
    let status = agent.wait("exit after SIGTERM").await;
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    assert!(
        wait_until_no_process(&name).await,
        "the background child ({name}) outlived the agent"
    );
}
