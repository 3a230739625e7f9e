//! What a connection builds before it knows the client's protocol version: the ACP v2 face is
//! built only for a client that negotiates v2, so a v1 client (every editor today) never pays
//! for it at start-up (`notes/2026-12-02-start-up-rss.md`). Over the built binary and real
//! pipes; the agent says on its debug log when it builds the face.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::support::acp::{binary, PROTOCOL_SERVE_ARGS};
use crate::support::sandbox::as_root_and_nobody;

/// The debug line the agent logs when it builds its v2 face.
const V2_FACE_BUILT: &str = "building the ACP v2 face";

/// `initialize` with `params`, the answer read, stdin closed, the agent's exit waited for:
/// the answer and everything the agent wrote on stderr.
fn initialize_then_eof(params: Value) -> (Value, String) {
    let mut child = Command::new(binary())
        .args(PROTOCOL_SERVE_ARGS)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start acp-bash serve");
    let mut stdin = child.stdin.take().expect("stdin");
    let request = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params});
    writeln!(stdin, "{request}").expect("write initialize");
    let mut answer = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut answer)
        .expect("read the answer");
    drop(stdin);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    assert!(child.wait().expect("wait").success(), "{stderr}");
    let answer = serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{e}: {answer}"));
    (answer, stderr)
}

#[test]
fn a_v1_connection_never_builds_the_v2_face() {
    as_root_and_nobody(
        "acp::startup::a_v1_connection_never_builds_the_v2_face",
        || {
            let (answer, stderr) = initialize_then_eof(json!({
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true},
                                       "terminal": true, "_meta": {"terminal_output": true}}
            }));
            assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
            assert!(stderr.contains("initialize"), "no debug log? {stderr}");
            assert!(!stderr.contains(V2_FACE_BUILT), "{stderr}");
        },
    );
}

#[test]
fn a_v2_connection_builds_the_v2_face() {
    as_root_and_nobody("acp::startup::a_v2_connection_builds_the_v2_face", || {
        let (answer, stderr) = initialize_then_eof(json!({
            "protocolVersion": 2, "info": {"name": "v2-test", "version": "0"},
            "capabilities": {}
        }));
        assert_eq!(answer["result"]["protocolVersion"], 2, "{answer}");
        assert!(stderr.contains(V2_FACE_BUILT), "{stderr}");
    });
}
