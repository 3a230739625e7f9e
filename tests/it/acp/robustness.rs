//! Hostile and careless input over real pipes (issue 10): bytes that are not UTF-8, blank lines,
//! lines and prompts over the limits, requests pipelined behind `initialize`, a client that stops
//! reading, and session ids that must not repeat. Each test writes raw bytes to the real
//! binary's stdin and reads its stdout line by line.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::acp::*;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;
const INITIALIZE_CARD: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"terminal":true,"_meta":{"terminal_output":true}}}}"#;

/// The real binary on raw pipes, its temp dir (also its TMPDIR, so logs land there) as cwd.
struct RawAgent {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    dir: PathBuf,
    _tmp: tempfile::TempDir,
}

impl RawAgent {
    fn start(args: &[&str]) -> RawAgent {
        let (tmp, dir) = temp_dir();
        let mut child = Command::new(binary())
            .args(["serve", "--sandbox", "full"])
            .args(args)
            .env("TMPDIR", &dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .current_dir(&dir)
            .spawn()
            .unwrap();
        RawAgent {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            dir,
            _tmp: tmp,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    fn send_line(&mut self, line: &str) {
        self.send(format!("{line}\n").as_bytes());
    }

    /// The next line from the agent, raw.
    fn raw_line(&mut self) -> String {
        let mut line = String::new();
        let read = self.stdout.read_line(&mut line).unwrap();
        assert!(
            read > 0,
            "the agent's stdout ended (did it exit? {:?})",
            self.child.try_wait()
        );
        line
    }

    /// Lines until the response to `id`: (everything before it, the response).
    fn until_response(&mut self, id: Value) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let value: Value = serde_json::from_str(&self.raw_line()).expect("JSON lines only");
            if value["id"] == id && value.get("method").is_none() {
                return (before, value);
            }
            before.push(value);
        }
    }

    fn initialize(&mut self) {
        self.send_line(INITIALIZE);
        let (_, response) = self.until_response(json!(1));
        assert!(response.get("result").is_some(), "{response}");
    }

    fn new_session(&mut self, id: u64) -> String {
        self.send_line(&new_session(id, &self.dir.clone()));
        let (_, response) = self.until_response(json!(id));
        // The slash commands are advertised right after the answer: read past them.
        let advertised: Value = serde_json::from_str(&self.raw_line()).expect("JSON lines only");
        assert_eq!(
            advertised["params"]["update"]["sessionUpdate"], "available_commands_update",
            "{advertised}"
        );
        response["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{response}"))
            .to_string()
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for RawAgent {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn new_session(id: u64, dir: &Path) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "session/new",
           "params": {"cwd": dir, "mcpServers": []}})
    .to_string()
}

fn prompt(id: u64, session: &str, text: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
           "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}})
    .to_string()
}

/// Waits until `path` exists (the scripts say how far they got by creating files). The poll
/// checks the file; its deadline is only a hang guard, so a run that never gets there fails
/// loudly instead of hanging the suite.
fn wait_for(path: &Path) {
    let deadline = std::time::Instant::now() + crate::support::acp::hang_guard();
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A `/proc/PID/status` figure in KiB (`VmRSS`, `VmHWM`).
fn memory_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn error_message(response: &Value) -> &str {
    response["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error: {response}"))
}

#[test]
fn a_line_that_is_not_utf8_gets_a_parse_error_and_everything_else_keeps_running() {
    let mut agent = RawAgent::start(&[]);
    agent.initialize();
    let session = agent.new_session(2);
    let go = agent.dir.join("go");
    agent.send_line(&prompt(
        3,
        &session,
        "touch started; while [ ! -e go ]; do sleep 0.01; done; echo finished",
    ));
    wait_for(&agent.dir.join("started"));

    let mut latin1 = prompt(4, &session, "echo caf_").into_bytes();
    let at = latin1.windows(4).position(|w| w == b"caf_").unwrap() + 3;
    latin1[at] = 0xE9;
    latin1.push(b'\n');
    agent.send(&latin1);
    let (_, refused) = agent.until_response(json!(4));
    assert_eq!(refused["error"]["code"], -32700, "{refused}");
    assert!(
        error_message(&refused).contains("is not valid UTF-8 (byte 0xE9"),
        "{refused}"
    );

    std::fs::write(&go, "").unwrap();
    let (updates, answered) = agent.until_response(json!(3));
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    assert!(
        updates.iter().any(|u| u.to_string().contains("finished")),
        "the running command went on: {updates:?}"
    );
    agent.send_line(&prompt(5, &session, "echo still here"));
    let (updates, answered) = agent.until_response(json!(5));
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    assert!(updates.iter().any(|u| u.to_string().contains("still here")));
}

#[test]
fn blank_lines_are_ignored() {
    let mut agent = RawAgent::start(&[]);
    agent.initialize();
    agent.send(b"\n   \n\r\n\t\n");
    agent.send_line(&new_session(2, &agent.dir.clone()));
    let first: Value = serde_json::from_str(&agent.raw_line()).unwrap();
    assert_eq!(
        first["id"], 2,
        "the first answer after blank lines: {first}"
    );
    assert!(first["result"]["sessionId"].is_string(), "{first}");
}

#[test]
fn session_new_pipelined_right_behind_initialize_succeeds() {
    for _ in 0..3 {
        let mut agent = RawAgent::start(&[]);
        let both = format!("{INITIALIZE}\n{}\n", new_session(2, &agent.dir.clone()));
        agent.send(both.as_bytes());
        let (_, initialized) = agent.until_response(json!(1));
        assert!(initialized.get("result").is_some(), "{initialized}");
        let (_, created) = agent.until_response(json!(2));
        assert!(created["result"]["sessionId"].is_string(), "{created}");
    }
}

#[test]
fn session_ids_are_random_128_bit_and_differ_across_processes() {
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut agent = RawAgent::start(&[]);
        agent.initialize();
        ids.push(agent.new_session(2));
        ids.push(agent.new_session(3));
    }
    for id in &ids {
        let hex = id.strip_prefix("sess-").unwrap_or_else(|| panic!("{id}"));
        assert_eq!(hex.len(), 32, "{id}");
        assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    }
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
}

#[test]
fn a_line_over_the_limit_is_discarded_as_it_streams_and_answered_with_its_id() {
    // --max-prompt-bytes 64KiB: lines over 8 × 64 KiB + 1 MiB = 1.5 MiB are discarded.
    let mut agent = RawAgent::start(&["--max-prompt-bytes", "64KiB"]);
    agent.initialize();
    let session = agent.new_session(2);
    let before = memory_kib(agent.pid(), "VmRSS");
    let huge = prompt(7, &session, &format!("echo {}", "x".repeat(200 << 20)));
    agent.send(huge.as_bytes());
    agent.send(b"\n");
    let line = agent.raw_line();
    assert!(
        line.len() < 2048,
        "the error echoes no input: {} bytes",
        line.len()
    );
    let refused: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(refused["id"], 7, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        error_message(&refused).contains("--max-prompt-bytes"),
        "{refused}"
    );
    assert_eq!(refused["error"]["data"]["bytes"], huge.len());
    let grew = memory_kib(agent.pid(), "VmHWM").saturating_sub(before);
    assert!(
        grew < 64 * 1024,
        "a 200 MiB line raised the peak RSS by {grew} KiB"
    );

    agent.send_line(&prompt(8, &session, "echo next"));
    let (_, answered) = agent.until_response(json!(8));
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
}

#[test]
fn a_prompt_over_max_prompt_bytes_is_refused_with_a_clear_message() {
    let mut agent = RawAgent::start(&["--max-prompt-bytes", "1KiB"]);
    agent.initialize();
    let session = agent.new_session(2);
    let script = format!("echo {}", "y".repeat(2000));
    agent.send_line(&prompt(3, &session, &script));
    let (updates, refused) = agent.until_response(json!(3));
    assert!(updates.is_empty(), "nothing ran: {updates:?}");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(
        error_message(&refused),
        "the prompt is 2005 bytes; acp-bash runs scripts of at most 1024 bytes (start it with a \
         larger --max-prompt-bytes to allow more)"
    );
    assert!(refused.to_string().len() < 1024);
}

#[test]
fn errors_never_echo_a_whole_input() {
    let mut agent = RawAgent::start(&[]);
    agent.initialize();
    let session = agent.new_session(2);
    let big = "z".repeat(300_000);
    // Invalid params (the SDK's error quotes the whole params), an unknown huge session id,
    // a long line that is not JSON, and an unknown huge mode.
    let requests = [
        json!({"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":session,"prompt":big}}),
        json!({"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":big,"prompt":[{"type":"text","text":"echo"}]}}),
        json!({"jsonrpc":"2.0","id":6,"method":"session/set_mode","params":{"sessionId":session,"modeId":big}}),
    ];
    for request in &requests {
        agent.send_line(&request.to_string());
        let id = request["id"].clone();
        let line = agent.raw_line();
        assert!(line.len() < 4096, "{} bytes: {}…", line.len(), &line[..200]);
        let response: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(response["id"], id, "{response}");
        assert!(response.get("error").is_some(), "{response}");
    }
    agent.send_line(&format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"x","params":"{big}"#
    ));
    let line = agent.raw_line();
    assert!(line.len() < 4096, "{} bytes", line.len());
    let response: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(response["id"], 5, "{response}");
    assert_eq!(response["error"]["code"], -32700, "{response}");
}

/// Issue 10's bar: a client that stops reading while 40 prompts flood output keeps the agent
/// under +100 MiB (it grew by about 173 MiB before the outgoing queue was bounded); live output
/// is dropped, but every final update and every response still arrives.
#[test]
fn forty_flooding_prompts_to_a_client_that_stops_reading_stay_under_100_mib() {
    const PROMPTS: u64 = 40;
    let mut agent = RawAgent::start(&[]);
    agent.send_line(INITIALIZE_CARD);
    agent.until_response(json!(1));
    let sessions: Vec<String> = (0..PROMPTS).map(|n| agent.new_session(100 + n)).collect();
    let before = memory_kib(agent.pid(), "VmRSS");

    // From here on, nothing is read until every command has finished.
    for (n, session) in sessions.iter().enumerate() {
        let script = format!("yes 'flood flood flood' | head -c 6000000; touch done-{n}");
        agent.send_line(&prompt(200 + n as u64, session, &script));
    }
    for n in 0..PROMPTS {
        wait_for(&agent.dir.join(format!("done-{n}")));
    }
    // The commands are done; the turns may still be sending. Read everything now.
    let (mut finals, mut answers) = (0, 0);
    while answers < PROMPTS {
        let message: Value = serde_json::from_str(&agent.raw_line()).unwrap();
        if message.get("method").is_none() {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            answers += 1;
        } else if message
            .pointer("/params/update/status")
            .is_some_and(|s| s == "completed")
        {
            finals += 1;
        }
    }
    assert_eq!(finals as u64, PROMPTS, "every call's final update arrived");
    let peak = memory_kib(agent.pid(), "VmHWM");
    let grew = peak.saturating_sub(before);
    eprintln!(
        "40 stalled flooding prompts: RSS {before} KiB before, peak {peak} KiB (+{grew} KiB)"
    );
    assert!(grew < 100 * 1024, "the agent grew by {grew} KiB");
}

/// Issue 21, point 5: a client that stops reading while its calls flood past the card's cap
/// gets, for every call, the cap notice and then where the full output is, each once and at
/// the start of a line, although live output around them was left out; and every `tool_call`,
/// final update and response. Lines of quotes double in JSON, so the 4 MiB the transport holds
/// before the client counts as behind fill up before any card reaches its cap: leaving live
/// output out is certain, not a matter of timing.
#[test]
fn a_client_that_stops_reading_still_gets_every_notice_on_a_line_of_its_own() {
    const CALLS: usize = 4;
    const CAP: usize = 4 << 20;
    let mut agent = RawAgent::start(&[]);
    agent.send_line(INITIALIZE_CARD);
    agent.until_response(json!(1));
    let sessions: Vec<String> = (0..CALLS)
        .map(|n| agent.new_session(100 + n as u64))
        .collect();
    for (n, session) in sessions.iter().enumerate() {
        let script = format!("yes '\"\"\"\"\"\"\"\"\"\"' | head -c 8000000; touch done-{n}");
        agent.send_line(&prompt(200 + n as u64, session, &script));
    }
    for n in 0..CALLS {
        wait_for(&agent.dir.join(format!("done-{n}")));
    }
    let mut data: std::collections::BTreeMap<String, String> = Default::default();
    let (mut calls, mut finals, mut answers) = (0, 0, 0);
    while answers < CALLS {
        let message: Value = serde_json::from_str(&agent.raw_line()).unwrap();
        if message.get("method").is_none() {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            answers += 1;
            continue;
        }
        let update = &message["params"]["update"];
        let id = update["toolCallId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match update["sessionUpdate"].as_str() {
            Some("tool_call") => calls += 1,
            Some("tool_call_update") if update["status"].is_string() => {
                assert_eq!(update["status"], "completed", "{update}");
                finals += 1;
            }
            Some("tool_call_update") => {
                if let Some(chunk) = update.pointer("/_meta/terminal_output/data") {
                    data.entry(id)
                        .or_default()
                        .push_str(chunk.as_str().unwrap());
                }
            }
            _ => {}
        }
    }
    assert_eq!(
        (calls, finals),
        (CALLS, CALLS),
        "every tool_call and final update"
    );
    assert_eq!(data.len(), CALLS);
    for (id, card) in &data {
        for notice in [
            "[acp-bash: stopped streaming after 4 MiB",
            "[acp-bash: full output: ",
        ] {
            assert_eq!(card.matches(notice).count(), 1, "{id}: {notice}");
            let at = card.find(notice).unwrap();
            assert!(
                at == 0 || card[..at].ends_with('\n'),
                "{id}: {notice:?} is glued to {:?}",
                &card[at.saturating_sub(40)..at]
            );
        }
        let (streamed, _) = card.split_once("[acp-bash: stopped streaming").unwrap();
        assert!(
            streamed.len() < CAP - (320 << 10),
            "{id}: {} bytes streamed: nothing was left out, the test proves nothing",
            streamed.len()
        );
        let path = card
            .split_once("[acp-bash: full output: ")
            .and_then(|(_, rest)| rest.split_once("]\r\n"))
            .map(|(path, _)| path)
            .unwrap_or_else(|| panic!("{id}: where the full output is: {card:?}"));
        assert_eq!(std::fs::metadata(path).unwrap().len(), 8_000_000, "{id}");
    }
}
