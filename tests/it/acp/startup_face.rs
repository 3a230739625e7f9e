//! The face is chosen by the client's first message, before anything is connected: a v1 client
//! gets the v1 face and a v2 client the v2 face, directly, without the SDK's protocol router in
//! between; what the router rewrites or answers itself (a version below 1 or above 2, a
//! refused v2 `initialize`, a batch, a response) still goes through it
//! (`notes/2026-12-02-start-up-face.md`). Every answer here is the one the agent gave before
//! the choice moved out of the router (checked against main's binary at cc027ad with
//! `ACP_BASH_TEST_AGENT_BINARY`). Over the built binary and real pipes; the agent says on its
//! debug log which face the first message chose.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::process::{ChildStdin, Command, Stdio};

use serde_json::{json, Value};

use crate::support::acp::{binary, PROTOCOL_SERVE_ARGS};
use crate::support::sandbox::as_root_and_nobody;

/// The debug line the agent logs when the first message chose the face.
const CHOSE: &str = "the first message chose the face";

/// Zed's `initialize` (protocol version 1), with `id`.
fn zed_initialize(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true},
                               "terminal": true, "_meta": {"terminal_output": true}}}})
    .to_string()
}

/// A valid v2 `initialize` with `id`.
fn v2_initialize(id: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": 2, "info": {"name": "v2-test", "version": "0"}, "capabilities": {}}})
    .to_string()
}

/// Waits until the agent has read everything written to `stdin` (the pipe holds nothing):
/// so that the next write comes in a read of its own.
fn wait_until_read(stdin: &ChildStdin) {
    let started = std::time::Instant::now();
    loop {
        let mut queued: libc::c_int = 0;
        // SAFETY: FIONREAD writes the pipe's byte count into `queued`.
        let result = unsafe { libc::ioctl(stdin.as_raw_fd(), libc::FIONREAD, &mut queued) };
        assert_eq!(result, 0, "FIONREAD: {}", std::io::Error::last_os_error());
        if queued == 0 {
            return;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "the agent did not read its input"
        );
        std::thread::yield_now();
    }
}

/// The agent started with the protocol tests' arguments; each of `writes` written to its stdin
/// once it has read the one before (so a line cut in two comes in two reads); `answers` lines
/// read from its stdout; then stdin closed and the exit waited for (it must succeed). Returns
/// the lines read and everything the agent wrote on stderr.
fn converse(writes: &[&str], answers: usize) -> (Vec<Value>, String) {
    converse_with(&[], writes, answers)
}

/// Like [`converse`], with `extra` after the protocol tests' arguments.
fn converse_with(extra: &[&str], writes: &[&str], answers: usize) -> (Vec<Value>, String) {
    let mut child = Command::new(binary())
        .args(PROTOCOL_SERVE_ARGS)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start acp-bash serve");
    let mut stdin = child.stdin.take().expect("stdin");
    for bytes in writes {
        wait_until_read(&stdin);
        stdin.write_all(bytes.as_bytes()).expect("write");
        stdin.flush().expect("flush");
    }
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut lines = Vec::new();
    for _ in 0..answers {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read an answer");
        let value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        lines.push(value);
    }
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read the rest");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    assert!(child.wait().expect("wait").success(), "{stderr}");
    assert_eq!(rest, "", "more than {answers} lines; {lines:?}");
    (lines, stderr)
}

/// The face the agent's debug log says the first message chose (`None`: no such line).
fn chosen_face(stderr: &str) -> Option<&str> {
    let line = stderr.lines().find(|line| line.contains(CHOSE))?;
    let (_, face) = line.split_once("face=")?;
    Some(face.trim().trim_matches('"'))
}

#[test]
fn a_v1_client_gets_the_v1_face_without_the_router() {
    as_root_and_nobody(
        "acp::startup_face::a_v1_client_gets_the_v1_face_without_the_router",
        || {
            let (answers, stderr) = converse(&[&format!("{}\n", zed_initialize(0))], 1);
            assert_eq!(answers[0]["id"], 0, "{answers:?}");
            assert_eq!(answers[0]["result"]["protocolVersion"], 1, "{answers:?}");
            assert_eq!(chosen_face(&stderr), Some("v1"), "{stderr}");
        },
    );
}

#[test]
fn a_v2_client_gets_the_v2_face_without_the_router() {
    let (answers, stderr) = converse(&[&format!("{}\n", v2_initialize(json!("a")))], 1);
    assert_eq!(answers[0]["id"], "a", "{answers:?}");
    assert_eq!(answers[0]["result"]["protocolVersion"], 2, "{answers:?}");
    assert_eq!(chosen_face(&stderr), Some("v2"), "{stderr}");
}

#[test]
fn an_initialize_cut_across_two_reads_is_read_whole() {
    let line = format!("{}\n", zed_initialize(3));
    let (head, tail) = line.split_at(line.len() / 2);
    let (answers, stderr) = converse(&[head, tail], 1);
    assert_eq!(answers[0]["id"], 3, "{answers:?}");
    assert_eq!(answers[0]["result"]["protocolVersion"], 1, "{answers:?}");
    assert_eq!(chosen_face(&stderr), Some("v1"), "{stderr}");
}

#[test]
fn end_of_input_before_any_message_ends_the_agent_quietly() {
    let (answers, stderr) = converse(&[], 0);
    assert!(answers.is_empty());
    assert_eq!(
        chosen_face(&stderr),
        Some("the SDK's protocol router"),
        "{stderr}"
    );
}

/// Lines that are not JSON are answered by the transport, before any face: the first line
/// that is JSON still chooses it.
#[test]
fn lines_that_are_not_json_are_answered_and_the_next_initialize_chooses_v1() {
    let (answers, stderr) = converse(&["not json\n\n{\"id\":\n", &zed_initialize(4), "\n"], 3);
    for (answer, line) in answers[..2].iter().zip([1, 3]) {
        assert_eq!(answer["id"], Value::Null, "{answers:?}");
        assert_eq!(answer["error"]["code"], -32700, "{answers:?}");
        assert_eq!(answer["error"]["data"]["line"], line, "{answers:?}");
    }
    assert_eq!(answers[2]["id"], 4, "{answers:?}");
    assert_eq!(answers[2]["result"]["protocolVersion"], 1, "{answers:?}");
    assert_eq!(chosen_face(&stderr), Some("v1"), "{stderr}");
}

/// A first line over the line limit is discarded as it streams and answered with its id by the
/// transport, before any face: the next `initialize` still chooses the v1 face.
#[test]
fn a_first_line_over_the_limit_is_answered_and_the_next_initialize_chooses_v1() {
    // --max-prompt-bytes 64KiB: lines over 8 × 64 KiB + 1 MiB = 1.5 MiB are discarded.
    let huge = json!({"jsonrpc": "2.0", "id": 8, "method": "initialize",
                      "params": {"protocolVersion": 1, "pad": "x".repeat(2 << 20)}});
    let (answers, stderr) = converse_with(
        &["--max-prompt-bytes", "64KiB"],
        &[&format!("{huge}\n"), &format!("{}\n", zed_initialize(9))],
        2,
    );
    assert_eq!(answers[0]["id"], 8, "{answers:?}");
    assert_eq!(answers[0]["error"]["code"], -32600, "{answers:?}");
    assert_eq!(answers[0]["error"]["data"]["line"], 1, "{answers:?}");
    assert_eq!(answers[1]["id"], 9, "{answers:?}");
    assert_eq!(answers[1]["result"]["protocolVersion"], 1, "{answers:?}");
    assert_eq!(chosen_face(&stderr), Some("v1"), "{stderr}");
}

/// A first line that ends in `\r\n` is the same message: it chooses the v1 face.
#[test]
fn a_first_initialize_ending_in_cr_lf_chooses_v1() {
    let (answers, stderr) = converse(&[&format!("{}\r\n", zed_initialize(10))], 1);
    assert_eq!(answers[0]["id"], 10, "{answers:?}");
    assert_eq!(answers[0]["result"]["protocolVersion"], 1, "{answers:?}");
    assert_eq!(chosen_face(&stderr), Some("v1"), "{stderr}");
}

/// A first request that is not `initialize` goes to the v1 face, which answers it as it always
/// did; `initialize` then works.
#[test]
fn a_first_request_that_is_not_initialize_gets_the_answer_it_always_got() {
    let new = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                     "params": {"cwd": "/", "mcpServers": []}});
    let (answers, stderr) = converse(&[&format!("{new}\n{}\n", zed_initialize(2))], 2);
    assert_eq!(answers[0]["id"], 1, "{answers:?}");
    assert_eq!(
        answers[0]["error"],
        json!({"code": -32600, "message": "Invalid request",
               "data": "ACP initialization must complete before `session/new` can be used"}),
        "{answers:?}"
    );
    assert_eq!(answers[1]["id"], 2, "{answers:?}");
    assert_eq!(answers[1]["result"]["protocolVersion"], 1, "{answers:?}");
    assert_eq!(chosen_face(&stderr), Some("v1"), "{stderr}");
}

/// A first notification goes to the v1 face, which ignores it; `initialize` then works.
#[test]
fn a_first_notification_is_ignored_and_initialize_follows() {
    let cancel = json!({"jsonrpc": "2.0", "method": "session/cancel",
                        "params": {"sessionId": "x"}});
    let (answers, stderr) = converse(&[&format!("{cancel}\n{}\n", zed_initialize(7))], 1);
    assert_eq!(answers[0]["id"], 7, "{answers:?}");
    assert_eq!(answers[0]["result"]["protocolVersion"], 1, "{answers:?}");
    assert_eq!(chosen_face(&stderr), Some("v1"), "{stderr}");
}

/// What the router answers itself before any face (a batch, a v2 `initialize` it refuses), and
/// what it skips (a response), it still does: then a v1 `initialize` gets the v1 face behind
/// it.
#[test]
fn what_the_router_answers_itself_it_still_answers_and_v1_follows() {
    let (answers, stderr) = converse(
        &[&format!(
            "[]\n{{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{{}}}}\n{}\n{}\n",
            v2_initialize(Value::Null),
            zed_initialize(5)
        )],
        3,
    );
    let refused = |data: &str| json!({"code": -32600, "message": "Invalid request", "data": data});
    assert_eq!(answers[0]["id"], Value::Null, "{answers:?}");
    assert_eq!(
        answers[0]["error"],
        refused("JSON-RPC batches are not supported; send each message individually"),
        "{answers:?}"
    );
    assert_eq!(answers[1]["id"], Value::Null, "{answers:?}");
    assert_eq!(
        answers[1]["error"],
        refused("ACP protocol v2 request ids must be a string or an integer, not null"),
        "{answers:?}"
    );
    assert_eq!(answers[2]["id"], 5, "{answers:?}");
    assert_eq!(answers[2]["result"]["protocolVersion"], 1, "{answers:?}");
    assert_eq!(
        chosen_face(&stderr),
        Some("the SDK's protocol router"),
        "{stderr}"
    );
}

/// The router rewrites an `initialize` below version 1 to version 1 for the v1 face.
#[test]
fn an_initialize_below_version_1_is_answered_with_version_1() {
    let line = json!({"jsonrpc": "2.0", "id": 6, "method": "initialize",
                      "params": {"protocolVersion": 0, "clientCapabilities": {}}});
    let (answers, stderr) = converse(&[&format!("{line}\n")], 1);
    assert_eq!(answers[0]["id"], 6, "{answers:?}");
    assert_eq!(answers[0]["result"]["protocolVersion"], 1, "{answers:?}");
    assert_eq!(
        chosen_face(&stderr),
        Some("the SDK's protocol router"),
        "{stderr}"
    );
}
