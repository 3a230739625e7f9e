//! The agent's stdin/stdout: served through the runtime's poller when both are pipes (what an
//! editor gives it), through the SDK's transport otherwise, the same protocol either way; and
//! the pipes are left as the agent found them.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, Stdio};

use crate::support::acp::*;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;

fn new_session(dir: &std::path::Path) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"session/new","params":{{"cwd":{},"mcpServers":[]}}}}"#,
        serde_json::Value::from(dir.to_str().unwrap())
    )
}

fn prompt(id: u64, session: &str, text: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    })
    .to_string()
}

fn nonblocking(fd: &impl AsRawFd) -> bool {
    // SAFETY: F_GETFL on an open fd.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    assert!(flags >= 0);
    flags & libc::O_NONBLOCK != 0
}

/// Reads lines until the response with `id`; returns every line read.
fn until_response(lines: &mut impl Iterator<Item = String>, id: u64) -> Vec<String> {
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let value: serde_json::Value = serde_json::from_str(&line).expect("JSON lines only");
        seen.push(line);
        if value["id"] == id && value.get("method").is_none() {
            return seen;
        }
    }
    panic!("stdout ended before the response {id}: {seen:?}");
}

#[test]
fn over_pipes_a_whole_turn_works_and_the_pipes_are_left_blocking() {
    let (_tmp, dir) = temp_dir();
    // A stdin pipe whose read end this test keeps too: the agent shares its open file
    // description, so the flags the agent leaves on it are visible here.
    let (stdin_read, mut stdin_write) = std::io::pipe().unwrap();
    let shared_read: OwnedFd = stdin_read.try_clone().unwrap().into();
    let mut agent = Command::new(binary())
        .args(["--sandbox", "full"])
        .stdin(Stdio::from(stdin_read))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .current_dir(&dir)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(agent.stdout.take().unwrap())
        .lines()
        .map(Result::unwrap);
    writeln!(stdin_write, "{INITIALIZE}").unwrap();
    // The connection is serving once it has answered a request.
    until_response(&mut lines, 1);
    writeln!(stdin_write, "{}", new_session(&dir)).unwrap();
    let created = until_response(&mut lines, 2);
    assert!(
        nonblocking(&shared_read),
        "serving: stdin is polled, not read by a blocking thread"
    );
    let session: serde_json::Value = serde_json::from_str(created.last().unwrap()).unwrap();
    let session = session["result"]["sessionId"].as_str().unwrap().to_string();
    writeln!(stdin_write, "{}", prompt(3, &session, "echo over-pipes")).unwrap();
    let turn = until_response(&mut lines, 3).join("\n");
    assert!(turn.contains("over-pipes"), "{turn}");
    assert!(turn.contains(r#""stopReason":"end_turn""#), "{turn}");

    drop(stdin_write);
    assert!(
        agent.wait().unwrap().success(),
        "EOF on stdin ends the agent cleanly"
    );
    assert!(
        !nonblocking(&shared_read),
        "the agent must put the shared pipe back in blocking mode"
    );
}

#[test]
fn stdin_from_a_file_is_served_too() {
    let (_tmp, dir) = temp_dir();
    let requests = dir.join("requests.jsonl");
    std::fs::write(&requests, format!("{INITIALIZE}\n")).unwrap();
    let output = Command::new(binary())
        .args(["--sandbox", "full"])
        .stdin(std::fs::File::open(&requests).unwrap())
        .stderr(Stdio::null())
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut lines = stdout.lines().map(str::to_string);
    let initialized = until_response(&mut lines, 1).join("\n");
    assert!(
        initialized.contains(r#""name":"acp-bash""#),
        "{initialized}"
    );
}
