//! The ACP v2 face of the built binary (`acp-bash serve` over real pipes), driven by a raw v2
//! client that writes and reads JSON lines: `initialize` with `protocolVersion: 2` gets the v2
//! face; each command is an agent-owned terminal (`terminal_update` with command, cwd and
//! `capabilities.cancel`, live bytes in `terminal_output_chunk`s, the end with `exitStatus`),
//! `terminal/cancel` stops one command's whole tree (not another session's), a `/bg` job is
//! listed in `state_update.background` until it ends, `session/cancel` leaves jobs running and
//! `session/close` stops them, a resume replays one `output` snapshot per terminal. Every line
//! of every transcript is checked against the vendored v2 schema
//! (`support/vendor/acp-schema.v2.json`): requests and notifications by method, results by
//! the method of the request they answer, errors as `Error`.
//!
//! That a v1 client sees exactly what it did before the router is proven by the v1 transcript
//! snapshots (unchanged).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use base64::Engine as _;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use crate::support::acp::{binary, guard, stdout_lines, temp_dir, wait_for_file};
use crate::support::engine::{gone, running, sleep_marker};
use crate::support::sandbox::as_root_and_nobody;
use crate::support::schema::schema_v2;

/// A v2 client over the binary's stdin and stdout.
struct V2Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    /// Every line, `-> ` from the client, `<- ` from the agent.
    transcript: Vec<String>,
    next_id: u64,
}

impl V2Client {
    /// `acp-bash serve` (full sandbox), with `extra` arguments (`--no-history` unless a
    /// `--state-dir` is given).
    fn start(extra: &[&str]) -> V2Client {
        V2Client::start_with_env(extra, &[])
    }

    /// [`Self::start`] with `env` set for the agent.
    fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> V2Client {
        let mut args = vec!["serve", "--log-level", "acp_bash=debug"];
        if !extra.contains(&"--sandbox") {
            args.extend(["--sandbox", "full"]);
        }
        if !extra.contains(&"--state-dir") {
            args.push("--no-history");
        }
        args.extend_from_slice(extra);
        let mut child = tokio::process::Command::new(binary())
            .args(&args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start acp-bash serve");
        let stdout = child.stdout.take().unwrap();
        let lines = stdout_lines(stdout);
        V2Client {
            stdin: child.stdin.take(),
            child,
            lines,
            transcript: Vec::new(),
            next_id: 1,
        }
    }

    async fn write(&mut self, message: Value) {
        let line = message.to_string();
        self.transcript.push(format!("-> {line}"));
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// Sends a request; returns its id.
    async fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.write(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    async fn notify(&mut self, method: &str, params: Value) {
        self.write(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// The agent's next message.
    async fn next(&mut self) -> Value {
        let line = guard("the agent's next line", self.lines.recv())
            .await
            .unwrap_or_else(|| panic!("the agent closed its stdout; so far:\n{}", self.last()));
        self.transcript.push(format!("<- {line}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    fn last(&self) -> String {
        let from = self.transcript.len().saturating_sub(20);
        self.transcript[from..].join("\n")
    }

    /// Reads until a message matches `wanted`; returns it.
    async fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        loop {
            let message = self.next().await;
            if wanted(&message) {
                return message;
            }
        }
    }

    /// The answer to request `id` (a `result` or an `error`).
    async fn answer(&mut self, id: u64) -> Value {
        self.until(|m| m["id"] == id && m.get("method").is_none())
            .await
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.answer(id).await
    }

    /// `initialize` asking for protocol version 2.
    async fn initialize(&mut self) -> Value {
        self.call(
            "initialize",
            json!({"protocolVersion": 2, "info": {"name": "v2-test", "version": "0"},
                   "capabilities": {}}),
        )
        .await
    }

    /// A new session in `cwd`, once its first `idle` is in.
    async fn new_session(&mut self, cwd: &Path) -> String {
        let answer = self
            .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        let id = answer["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_string();
        self.until(|m| is_state(m, &id, "idle")).await;
        id
    }

    /// Sends a prompt; returns its request id (the answer comes at once, the turn after).
    async fn prompt(&mut self, session: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// Runs `text` as a turn: every update of `session` until its idle with a stop reason.
    async fn turn(&mut self, session: &str, text: &str) -> Vec<Value> {
        let id = self.prompt(session, text).await;
        let mut updates = Vec::new();
        loop {
            let message = self.next().await;
            if message["id"] == id {
                assert!(message["result"]["messageId"].is_string(), "{message}");
                continue;
            }
            if message["params"]["sessionId"] != session {
                continue;
            }
            let update = message["params"]["update"].clone();
            let ended = is_state(&message, session, "idle") && update.get("stopReason").is_some();
            updates.push(update);
            if ended {
                return updates;
            }
        }
    }

    /// Closes stdin, waits for the agent to exit; returns the transcript, checked against
    /// the v2 schema.
    async fn finish(mut self) -> Vec<String> {
        drop(self.stdin.take());
        while let Some(line) = guard("the agent's last lines", self.lines.recv()).await {
            self.transcript.push(format!("<- {line}"));
        }
        let status = guard("the agent's exit", self.child.wait()).await.unwrap();
        assert!(status.success(), "acp-bash exited with {status}");
        validate_v2(&self.transcript);
        self.transcript
    }
}

/// Whether `message` is a `state_update` of `session` in `state`.
fn is_state(message: &Value, session: &str, state: &str) -> bool {
    message["method"] == "session/update"
        && message["params"]["sessionId"] == session
        && message["params"]["update"]["sessionUpdate"] == "state_update"
        && message["params"]["update"]["state"] == state
}

fn decode(data: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(data.as_str().expect("base64 text"))
        .expect("valid base64")
}

/// The bytes of `terminal`'s chunks, in order.
fn chunks_of(updates: &[Value], terminal: &str) -> Vec<u8> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "terminal_output_chunk" && u["terminalId"] == terminal)
        .flat_map(|u| decode(&u["data"]))
        .collect()
}

/// The terminal updates of `terminal`.
fn terminal_updates<'a>(updates: &'a [Value], terminal: &str) -> Vec<&'a Value> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "terminal_update" && u["terminalId"] == terminal)
        .collect()
}

/// The terminal ids in a state update's `background`.
fn background(update: &Value) -> Vec<String> {
    update["background"]
        .as_array()
        .unwrap_or_else(|| panic!("no background list: {update}"))
        .iter()
        .map(|work| {
            assert_eq!(work["type"], "terminal", "{work}");
            work["terminalId"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Every line against the v2 schema: requests and notifications by method (and direction),
/// results by the request they answer, errors as `Error`; every request answered.
pub(crate) fn validate_v2(transcript: &[String]) {
    let schema = schema_v2();
    let mut pending: HashMap<(bool, String), String> = HashMap::new();
    for line in transcript {
        let (direction, json) = line.split_at(3);
        let from_client = direction == "-> ";
        let message: Value = serde_json::from_str(json).expect("JSON");
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        if let Some(method) = message.get("method").and_then(Value::as_str) {
            let types = schema
                .method(method)
                .unwrap_or_else(|| fail(line, format!("{method} is not a v2 method")));
            if let Err(problem) = schema.validate(&types.params, &message["params"]) {
                fail(line, problem);
            }
            if let Some(id) = message.get("id") {
                pending.insert((from_client, id.to_string()), method.to_string());
            }
            continue;
        }
        let id = message["id"].to_string();
        let method = pending
            .remove(&(!from_client, id.clone()))
            .unwrap_or_else(|| fail(line, format!("an answer to no request (id {id})")));
        if let Some(error) = message.get("error") {
            if let Err(problem) = schema.validate("Error", error) {
                fail(line, problem);
            }
            continue;
        }
        let result = schema
            .method(&method)
            .and_then(|types| types.result.clone())
            .unwrap_or_else(|| fail(line, format!("{method} has no result type")));
        if let Err(problem) = schema.validate(&result, &message["result"]) {
            fail(line, problem);
        }
    }
    assert!(pending.is_empty(), "unanswered: {pending:?}");
}

fn fail(line: &str, problem: String) -> ! {
    panic!("{line}\n{problem}")
}

/// The transcript as a snapshot shows it: ids renumbered, session ids numbered, the temp dir
/// `[TMP]`, the command list redacted, and each terminal's consecutive chunks merged and
/// decoded (how the bytes are batched depends on timing; the bytes do not).
pub(crate) fn normalized(transcript: &[String], temp: &Path) -> String {
    let temp = temp.to_str().unwrap();
    let session_id = regex::Regex::new("sess-[0-9a-f]{32}").unwrap();
    let mut sessions = HashMap::<String, usize>::new();
    let mut out: Vec<(String, Value)> = Vec::new();
    for line in transcript {
        let line = session_id.replace_all(line, |found: &regex::Captures| {
            let n = sessions.len() + 1;
            format!("sess-{}", sessions.entry(found[0].to_string()).or_insert(n))
        });
        let (direction, json) = line.split_at(3);
        let mut value: Value = serde_json::from_str(&json.replace(temp, "[TMP]")).unwrap();
        if let Some(update) = value.pointer_mut("/params/update") {
            if update["sessionUpdate"] == "available_commands_update" {
                update["availableCommands"] = "[THE SLASH COMMANDS]".into();
            }
            if let Some(duration) = update.pointer_mut("/rawOutput/duration_ms") {
                *duration = "[DURATION]".into();
            }
            for pointer in ["/data", "/output/data"] {
                if let Some(data) = update.pointer_mut(pointer) {
                    *data = String::from_utf8_lossy(&decode(data)).into_owned().into();
                }
            }
        }
        let chunk = |v: &Value| {
            (v.pointer("/params/update/sessionUpdate") == Some(&json!("terminal_output_chunk")))
                .then(|| v["params"]["update"]["terminalId"].clone())
        };
        if let (Some(terminal), Some((last_direction, last))) = (chunk(&value), out.last_mut()) {
            if *last_direction == direction && chunk(last) == Some(terminal) {
                let merged = &mut last["params"]["update"]["data"];
                *merged = format!(
                    "{}{}",
                    merged.as_str().unwrap(),
                    value["params"]["update"]["data"].as_str().unwrap()
                )
                .into();
                continue;
            }
        }
        out.push((direction.to_string(), value));
    }
    out.into_iter()
        .map(|(direction, value)| format!("{direction}{value}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs a test body on its own runtime (the hostile tests run twice: as root, and as nobody
/// in a copy of the test binary).
fn block_on(body: impl std::future::Future<Output = ()>) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(body)
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(name, text);
    });
}

#[tokio::test]
async fn a_v2_client_gets_a_terminal_per_command_with_chunks_and_its_exit() {
    let (tmp, dir) = temp_dir();
    let mut client = V2Client::start(&[]);
    let init = client.initialize().await;
    assert_eq!(init["result"]["protocolVersion"], 2, "{init}");
    let session = client.new_session(&dir).await;
    let first = client
        .turn(&session, "printf 'one\\r\\ntwo \\033[31mred\\033[0m é\\n'")
        .await;
    let second = client.turn(&session, "echo second; exit 3").await;
    for (updates, terminal, bytes, code) in [
        (
            &first,
            "call-1-1",
            "one\r\ntwo \u{1b}[31mred\u{1b}[0m é\n".as_bytes(),
            0,
        ),
        (&second, "call-1-2", b"second\n".as_slice(), 3),
    ] {
        let kinds: Vec<&str> = updates
            .iter()
            .map(|u| u["sessionUpdate"].as_str().unwrap())
            .collect();
        // The user message, running, the terminal before the call that shows it, the call's
        // end after the terminal's, idle.
        assert_eq!(
            kinds[..4],
            [
                "user_message",
                "state_update",
                "terminal_update",
                "tool_call_update"
            ],
            "{updates:#?}"
        );
        assert_eq!(updates[1]["state"], "running");
        let opened = &updates[2];
        assert_eq!(opened["terminalId"], terminal, "{opened}");
        assert!(
            opened["command"].is_string() && opened["cwd"] == json!(dir),
            "{opened}"
        );
        assert!(opened["capabilities"]["cancel"].is_object(), "{opened}");
        assert_eq!(
            updates[3]["content"][0],
            json!({"type": "terminal", "terminalId": terminal})
        );
        assert_eq!(
            chunks_of(updates, terminal),
            bytes,
            "LF stays LF, escapes and UTF-8 pass"
        );
        let ends = terminal_updates(updates, terminal);
        let exited = ends.last().unwrap();
        assert_eq!(exited["exitStatus"]["exitCode"], code, "{exited}");
        assert!(
            exited["capabilities"].is_null(),
            "cancel is withdrawn: {exited}"
        );
        let idle = updates.last().unwrap();
        assert_eq!(idle["stopReason"], "end_turn", "{idle}");
        assert_eq!(background(idle), Vec::<String>::new());
    }
    let transcript = client.finish().await;
    snapshot("v2__terminal_per_command", &normalized(&transcript, &dir));
    drop(tmp);
}

#[test]
fn terminal_cancel_stops_one_commands_tree_while_another_sessions_command_runs() {
    as_root_and_nobody(
        "acp::v2_face::terminal_cancel_stops_one_commands_tree_while_another_sessions_command_runs",
        || {
            block_on(
                terminal_cancel_stops_one_commands_tree_while_another_sessions_command_runs_body(),
            )
        },
    );
}

async fn terminal_cancel_stops_one_commands_tree_while_another_sessions_command_runs_body() {
    let (_tmp, dir) = temp_dir();
    let (a_mark, b_mark) = (sleep_marker("v2-cancel-a"), sleep_marker("v2-cancel-b"));
    let mut client = V2Client::start(&[]);
    client.initialize().await;
    let a = client.new_session(&dir).await;
    let b = client.new_session(&dir).await;
    // Each command's tree: a shell, a child shell, a sleep in it.
    let script = |mark: &str, tag: &str| {
        format!("(sleep {mark}; true) & touch {tag}; wait; echo not-reached")
    };
    let a_prompt = client.prompt(&a, &script(&a_mark, "a-started")).await;
    let b_prompt = client.prompt(&b, &script(&b_mark, "b-started")).await;
    wait_for_file(&dir.join("a-started")).await;
    wait_for_file(&dir.join("b-started")).await;
    client.answer(a_prompt).await;
    client.answer(b_prompt).await;
    // Hostile: session a cancels b's terminal: refused, b keeps running.
    let refused = client
        .call(
            "terminal/cancel",
            json!({"sessionId": a, "terminalId": "call-2-1"}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let cancelled = client
        .call(
            "terminal/cancel",
            json!({"sessionId": a, "terminalId": "call-1-1"}),
        )
        .await;
    assert_eq!(cancelled["result"], json!({}), "{cancelled}");
    let exited = client
        .until(|m| {
            m["params"]["sessionId"] == a
                && m["params"]["update"]["sessionUpdate"] == "terminal_update"
                && m["params"]["update"]["exitStatus"].is_object()
        })
        .await;
    assert_eq!(exited["params"]["update"]["terminalId"], "call-1-1");
    assert!(gone(&a_mark).await, "a's whole tree is killed");
    client.until(|m| is_state(m, &a, "idle")).await;
    assert_eq!(running(&b_mark), 1, "b's command still runs");
    // A finished terminal is not cancellable any more.
    let again = client
        .call(
            "terminal/cancel",
            json!({"sessionId": a, "terminalId": "call-1-1"}),
        )
        .await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    client
        .notify("session/cancel", json!({"sessionId": b}))
        .await;
    client.until(|m| is_state(m, &b, "idle")).await;
    assert!(gone(&b_mark).await);
    client.finish().await;
}

#[test]
fn bad_terminal_ids_get_invalid_params() {
    as_root_and_nobody("acp::v2_face::bad_terminal_ids_get_invalid_params", || {
        block_on(bad_terminal_ids_get_invalid_params_body())
    });
}

async fn bad_terminal_ids_get_invalid_params_body() {
    let (_tmp, dir) = temp_dir();
    let mut client = V2Client::start(&[]);
    client.initialize().await;
    let session = client.new_session(&dir).await;
    client.turn(&session, "true").await;
    // Another session's running job: a terminal id this session must not reach.
    let mark = sleep_marker("v2-other-job");
    let other = client.new_session(&dir).await;
    let updates = client
        .turn(&other, &format!("/bg touch started; sleep {mark}"))
        .await;
    let job = background(updates.last().unwrap()).pop().expect("a job");
    guard("the other session's job's sleep", async {
        while running(&mark) != 1 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    for (session, terminal) in [
        (session.as_str(), job.as_str()),
        (session.as_str(), "call-1-99"),
        (session.as_str(), "call-1-1"),
        (session.as_str(), "{\"jsonrpc\":\"2.0\"}"),
        ("sess-nope", "call-1-1"),
    ] {
        let answer = client
            .call(
                "terminal/cancel",
                json!({"sessionId": session, "terminalId": terminal}),
            )
            .await;
        assert_eq!(
            answer["error"]["code"], -32602,
            "{session} {terminal}: {answer}"
        );
    }
    assert_eq!(running(&mark), 1, "the other session's job still runs");
    client
        .call("session/close", json!({"sessionId": other}))
        .await;
    assert!(gone(&mark).await);
    client.finish().await;
}

#[tokio::test]
async fn a_bg_job_is_background_work_until_it_ends_and_session_cancel_leaves_it_running() {
    let (_tmp, dir) = temp_dir();
    let mut client = V2Client::start(&[]);
    client.initialize().await;
    let session = client.new_session(&dir).await;
    let script = "/bg touch started; while [ ! -e go ]; do sleep 0.01; done; echo done";
    let updates = client.turn(&session, script).await;
    let opened = updates
        .iter()
        .find(|u| {
            u["sessionUpdate"] == "terminal_update" && u["capabilities"]["cancel"].is_object()
        })
        .unwrap_or_else(|| panic!("no job terminal: {updates:#?}"));
    let job = opened["terminalId"].as_str().unwrap().to_string();
    assert_eq!(background(updates.last().unwrap()), vec![job.clone()]);
    wait_for_file(&dir.join("started")).await;
    // session/cancel stops turns, not jobs.
    client
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let listed = client.turn(&session, "echo meanwhile").await;
    assert_eq!(
        background(&listed[1]),
        vec![job.clone()],
        "running lists it"
    );
    assert_eq!(
        background(listed.last().unwrap()),
        vec![job.clone()],
        "idle lists it"
    );
    std::fs::write(dir.join("go"), "").unwrap();
    let exited = client
        .until(|m| {
            m["params"]["update"]["sessionUpdate"] == "terminal_update"
                && m["params"]["update"]["terminalId"] == job.as_str()
                && m["params"]["update"]["exitStatus"].is_object()
        })
        .await;
    assert_eq!(exited["params"]["update"]["exitStatus"]["exitCode"], 0);
    let after = client.until(|m| is_state(m, &session, "idle")).await;
    assert_eq!(
        background(&after["params"]["update"]),
        Vec::<String>::new(),
        "{after}"
    );
    client.finish().await;
}

/// Issue 47's transcript on the v2 face (the v1 ones are `changes::transcript_{zed,plain}`): a
/// read, a search and a listing (typed, `--classify-typed`), a `sed -i` edit, a new file, a
/// delete and `/undo`, in workspace mode; each change is one `diff` with `changes[]` and the Git
/// `patch`. Kept: the calls' opening lines and the agent's messages (the terminals are pinned
/// by `v2__terminal_per_command`).
#[tokio::test]
async fn changes_transcript_v2() {
    let (_tmp, dir) = temp_dir();
    let dir = dir.canonicalize().unwrap();
    std::fs::write(dir.join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    std::fs::write(dir.join("old.txt"), "old\n").unwrap();
    let mut client = V2Client::start(&["--sandbox", "workspace", "--classify-typed"]);
    client.initialize().await;
    let session = client.new_session(&dir).await;
    for prompt in [
        "cat notes.txt",
        "grep -n beta notes.txt",
        "ls",
        "sed -i 's/beta/BETA/' notes.txt",
        "printf 'fresh\\n' > new.txt",
        "rm old.txt",
        "/undo",
    ] {
        client.turn(&session, prompt).await;
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("old.txt")).unwrap(),
        "old\n"
    );
    let transcript = client.finish().await;
    let kept: Vec<String> = transcript
        .into_iter()
        .filter(|line| {
            [
                "\"kind\":\"edit\"",
                "\"kind\":\"read\"",
                "\"kind\":\"search\"",
            ]
            .iter()
            .any(|kind| line.contains(kind))
                || line.contains("\"agent_message_chunk\"")
        })
        .collect();
    snapshot("v2__changes", &normalized(&kept, &dir));
}

#[tokio::test]
async fn session_close_stops_a_running_job() {
    let (_tmp, dir) = temp_dir();
    let mark = sleep_marker("v2-close");
    let mut client = V2Client::start(&[]);
    client.initialize().await;
    let session = client.new_session(&dir).await;
    client
        .turn(&session, &format!("/bg touch started; sleep {mark}"))
        .await;
    guard("the job's sleep", async {
        while running(&mark) != 1 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    let id = client
        .request("session/close", json!({"sessionId": session}))
        .await;
    let mut exited = false;
    loop {
        let message = client.next().await;
        if message["id"] == id {
            assert_eq!(message["result"], json!({}), "{message}");
            break;
        }
        exited |= message["params"]["update"]["exitStatus"].is_object();
    }
    assert!(
        exited,
        "the job's terminal ends (exitStatus) before close answers"
    );
    assert!(gone(&mark).await, "the job's process is gone");
    client.finish().await;
}

#[test]
fn terminal_cancel_kills_a_jobs_tree() {
    as_root_and_nobody("acp::v2_face::terminal_cancel_kills_a_jobs_tree", || {
        block_on(terminal_cancel_kills_a_jobs_tree_body())
    });
}

async fn terminal_cancel_kills_a_jobs_tree_body() {
    let (_tmp, dir) = temp_dir();
    let mark = sleep_marker("v2-kill-job");
    let mut client = V2Client::start(&[]);
    client.initialize().await;
    let session = client.new_session(&dir).await;
    let updates = client
        .turn(
            &session,
            &format!("/bg (sleep {mark}; true) & touch started; wait"),
        )
        .await;
    let job = background(updates.last().unwrap()).pop().expect("a job");
    wait_for_file(&dir.join("started")).await;
    let answer = client
        .call(
            "terminal/cancel",
            json!({"sessionId": session, "terminalId": job}),
        )
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");
    let after = client
        .until(|m| is_state(m, &session, "idle") && background(&m["params"]["update"]).is_empty())
        .await;
    drop(after);
    assert!(gone(&mark).await, "the job's whole tree is killed");
    client.finish().await;
}

#[tokio::test]
async fn resume_replays_one_output_snapshot_per_terminal() {
    let (tmp, dir) = temp_dir();
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let state_dir: PathBuf = state.clone();
    let args = ["--state-dir", state_dir.to_str().unwrap()];
    let mut client = V2Client::start(&args);
    client.initialize().await;
    let session = client.new_session(&dir).await;
    client.turn(&session, "printf 'first\\n'").await;
    client.turn(&session, "printf 'second'; exit 2").await;
    client.finish().await;

    // A later agent process: the stored session, replayed from the start.
    let mut client = V2Client::start(&args);
    client.initialize().await;
    let id = client
        .request(
            "session/resume",
            json!({"sessionId": session, "cwd": dir, "mcpServers": [],
                   "replayFrom": {"type": "start"}}),
        )
        .await;
    let mut replayed = Vec::new();
    loop {
        let message = client.next().await;
        if message["id"] == id {
            let mode = option(&message["result"]["configOptions"], "mode");
            assert_eq!(mode["currentValue"], "full", "{message}");
            break;
        }
        replayed.push(message["params"]["update"].clone());
    }
    for (terminal, output, code) in [("call-1-1", "first\n", 0), ("call-1-2", "second", 2)] {
        let updates = terminal_updates(&replayed, terminal);
        let snapshots: Vec<_> = updates
            .iter()
            .filter(|u| u.get("output").is_some())
            .collect();
        assert_eq!(snapshots.len(), 1, "{terminal}: {updates:#?}");
        assert_eq!(decode(&snapshots[0]["output"]["data"]), output.as_bytes());
        assert_eq!(updates.last().unwrap()["exitStatus"]["exitCode"], code);
        assert!(
            chunks_of(&replayed, terminal).is_empty(),
            "no chunks in a replay"
        );
        assert!(
            updates
                .iter()
                .all(|u| u.get("capabilities").is_none_or(Value::is_null)),
            "an ended terminal is not offered for cancel: {updates:#?}"
        );
    }
    let last = replayed.last().unwrap();
    assert_eq!(last["state"], "idle", "{last}");
    let transcript = client.finish().await;
    snapshot("v2__resume_replay", &normalized(&transcript, &dir));
}

/// Hostile: a command that prints what looks like protocol (a whole JSON-RPC answer, a
/// closing brace and a new message, a bare CR, a lone quote and backslash, bytes that are not
/// UTF-8) stays inside its chunks: every line the agent writes is one message of the schema,
/// no answer to a request nobody sent appears, and the chunks decode to what it printed.
#[test]
fn a_command_printing_protocol_cannot_break_a_chunk() {
    as_root_and_nobody(
        "acp::v2_face::a_command_printing_protocol_cannot_break_a_chunk",
        || block_on(a_command_printing_protocol_cannot_break_a_chunk_body()),
    );
}

async fn a_command_printing_protocol_cannot_break_a_chunk_body() {
    let (_tmp, dir) = temp_dir();
    let mut client = V2Client::start(&[]);
    client.initialize().await;
    let session = client.new_session(&dir).await;
    let printed = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"session/update\"}\r\\\"\n";
    std::fs::write(dir.join("lookalike"), printed).unwrap();
    let updates = client.turn(&session, "cat lookalike").await;
    assert_eq!(chunks_of(&updates, "call-1-1"), printed.as_bytes());
    client.finish().await;
}

/// The option of category `category` in a `configOptions` list.
fn option<'a>(options: &'a Value, category: &str) -> &'a Value {
    options
        .as_array()
        .unwrap_or_else(|| panic!("no configOptions: {options}"))
        .iter()
        .find(|o| o["category"] == category)
        .unwrap_or_else(|| panic!("no option of category {category}: {options}"))
}

/// The value ids a select offers.
fn values(option: &Value) -> Vec<String> {
    option["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap().to_string())
        .collect()
}

/// Point 1 on the v2 face: `session/new` and `session/resume` answer with `configOptions`
/// (the sandbox mode, a select of category `mode`); `session/set_config_option` changes the
/// session's next command and answers with the whole list; unknown ids, unknown values and a
/// value of the wrong type are -32602 naming the valid ones, and change nothing; a resume in a
/// later process has the mode the session chose.
#[tokio::test]
async fn config_options_on_new_and_resume_and_set_config_option_changes_the_next_command() {
    let (tmp, dir) = temp_dir();
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let args = ["--state-dir", state.to_str().unwrap()];
    let mut client = V2Client::start(&args);
    client.initialize().await;
    let answer = client
        .call("session/new", json!({"cwd": dir, "mcpServers": []}))
        .await;
    let session = answer["result"]["sessionId"].as_str().unwrap().to_string();
    let options = &answer["result"]["configOptions"];
    let mode = option(options, "mode");
    assert_eq!(mode["type"], "select", "{mode}");
    assert_eq!(mode["currentValue"], "full", "{mode}");
    let modes = values(mode);
    assert!(modes.contains(&"read-only".to_string()), "{modes:?}");
    let mode_id = mode["configId"].as_str().unwrap().to_string();
    client.until(|m| is_state(m, &session, "idle")).await;
    let set = |config: &str, value: Value| {
        let mut params = json!({"sessionId": session, "configId": config});
        params.as_object_mut().unwrap().extend(
            value
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        params
    };
    for (params, names) in [
        (
            set("colour", json!({"type": "id", "value": "red"})),
            mode_id.as_str(),
        ),
        (
            set(&mode_id, json!({"type": "id", "value": "wide-open"})),
            "read-only",
        ),
        (
            set(&mode_id, json!({"type": "boolean", "value": true})),
            "read-only",
        ),
    ] {
        let refused = client
            .call("session/set_config_option", params.clone())
            .await;
        assert_eq!(refused["error"]["code"], -32602, "{params}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(names), "{params}: {message}");
    }
    let changed = client
        .call(
            "session/set_config_option",
            set(&mode_id, json!({"type": "id", "value": "read-only"})),
        )
        .await;
    let options = &changed["result"]["configOptions"];
    assert_eq!(
        option(options, "mode")["currentValue"],
        "read-only",
        "{changed}"
    );
    // The next command runs read-only: it cannot write the workspace.
    let updates = client.turn(&session, "touch written").await;
    let exited = terminal_updates(&updates, "call-1-1")
        .last()
        .copied()
        .cloned();
    assert_ne!(exited.unwrap()["exitStatus"]["exitCode"], 0);
    assert!(!dir.join("written").exists(), "a read-only command wrote");
    client.finish().await;

    // A later agent process: resume answers with the mode the session chose.
    let mut client = V2Client::start(&args);
    client.initialize().await;
    let resumed = client
        .call(
            "session/resume",
            json!({"sessionId": session, "cwd": dir, "mcpServers": []}),
        )
        .await;
    let options = &resumed["result"]["configOptions"];
    assert_eq!(
        option(options, "mode")["currentValue"],
        "read-only",
        "{resumed}"
    );
    client.finish().await;
}

/// With `--model` given twice, the v2 face's options carry the model as a select of category
/// `model` (the first the default), and `session/set_config_option` chooses the other.
#[tokio::test]
async fn with_two_models_the_model_is_a_config_option_on_v2_too() {
    let (_tmp, dir) = temp_dir();
    let mut client = V2Client::start_with_env(
        &[
            "--model",
            "openai:fake-a",
            "--model",
            "openai:fake-b",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
        &[("OPENAI_API_KEY", "sk-test-v2-config")],
    );
    client.initialize().await;
    let answer = client
        .call("session/new", json!({"cwd": dir, "mcpServers": []}))
        .await;
    let session = answer["result"]["sessionId"].as_str().unwrap().to_string();
    let model = option(&answer["result"]["configOptions"], "model");
    assert_eq!(model["currentValue"], "openai:fake-a", "{model}");
    assert_eq!(values(model), ["openai:fake-a", "openai:fake-b"]);
    let model_id = model["configId"].as_str().unwrap().to_string();
    let changed = client
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": model_id, "type": "id",
                   "value": "openai:fake-b"}),
        )
        .await;
    let model = option(&changed["result"]["configOptions"], "model");
    assert_eq!(model["currentValue"], "openai:fake-b", "{changed}");
    let refused = client
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": model_id, "type": "id",
                   "value": "openai:fake-c"}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    client.finish().await;
}

/// The v2 face starts the MCP servers of `session/new` as v1 does: `initialize` advertises
/// stdio and HTTP servers under `session.mcp`; a stdio server's tool is offered to the model
/// and its call is a `tool_call_update` (v2's upsert: opened with title, kind and input, then
/// completed with the result); a transport acp-bash does not take is refused with -32602.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_v2_face_starts_mcp_servers_and_calls_their_tools() {
    use crate::support::fake_model::{openai, FakeModel};
    let fake = FakeModel::start(vec![
        openai::reply(&[], &[("call_1", "mcp__s__echo", &["{\"text\": \"v2\"}"])]),
        openai::reply(&["Echoed."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let script = dir.join("mcp-server.py");
    std::fs::write(&script, include_str!("../fixtures/mcp/server.py")).unwrap();
    let base = format!("{}/v1", fake.base);
    let mut client = V2Client::start_with_env(
        &["--model", "openai:fake", "--base-url", &base],
        &[("OPENAI_API_KEY", "sk-test-v2-mcp")],
    );
    let init = client.initialize().await;
    let mcp = &init["result"]["capabilities"]["session"]["mcp"];
    assert!(mcp["stdio"].is_object(), "{init}");
    assert!(mcp["http"].is_object(), "{init}");
    let refused = client
        .call(
            "session/new",
            json!({"cwd": dir, "mcpServers": [
                {"type": "websocket", "name": "w", "url": "ws://127.0.0.1:9/"}]}),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not one acp-bash takes")),
        "{refused}"
    );
    let answer = client
        .call(
            "session/new",
            json!({"cwd": dir, "mcpServers": [{"type": "stdio", "name": "s",
                   "command": "/bin/bash",
                   "args": ["-c", format!("exec python3 {} normal", script.display())]}]}),
        )
        .await;
    let session = answer["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session: {answer}"))
        .to_string();
    client.until(|m| is_state(m, &session, "idle")).await;
    let updates = client.turn(&session, "echo v2").await;
    let calls: Vec<&Value> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .collect();
    assert!(calls.len() >= 2, "{updates:?}");
    assert_eq!(calls[0]["title"], "s: echo", "{updates:?}");
    assert_eq!(calls[0]["kind"], "other", "{updates:?}");
    assert_eq!(calls[0]["status"], "in_progress", "{updates:?}");
    assert_eq!(calls[0]["rawInput"], json!({"text": "v2"}), "{updates:?}");
    let last = calls.last().unwrap();
    assert_eq!(last["status"], "completed", "{updates:?}");
    assert!(last.to_string().contains("echo: v2"), "{updates:?}");
    let results: Vec<String> = fake.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(results, ["echo: v2"]);
    client.finish().await;
}

/// Both faces advertise the prompt's content as the driver takes it: with a model driver,
/// images and embedded context (v1 `agentCapabilities.promptCapabilities`, v2
/// `capabilities.session.prompt`); with the shell driver (a prompt is a script), neither.
#[tokio::test]
async fn both_faces_advertise_images_and_embedded_context_only_with_a_model_driver() {
    let model: &[&str] = &[
        "--model",
        "openai:fake",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ];
    for (driver, extra, takes) in [("model", model, true), ("shell", &[][..], false)] {
        // v2: `{}` each where taken; the whole `prompt` absent (the baseline) where neither.
        let mut client =
            V2Client::start_with_env(extra, &[("OPENAI_API_KEY", "sk-test-v2-prompt")]);
        let init = client.initialize().await;
        let prompt = &init["result"]["capabilities"]["session"]["prompt"];
        let expected = match takes {
            true => json!({"image": {}, "embeddedContext": {}}),
            false => Value::Null,
        };
        assert_eq!(prompt, &expected, "v2, {driver} driver: {init}");
        client.finish().await;
        // v1: booleans.
        let mut client =
            V2Client::start_with_env(extra, &[("OPENAI_API_KEY", "sk-test-v2-prompt")]);
        let init = client
            .call(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": {}}),
            )
            .await;
        let prompt = &init["result"]["agentCapabilities"]["promptCapabilities"];
        assert_eq!(prompt["image"], takes, "v1, {driver} driver: {init}");
        assert_eq!(
            prompt["embeddedContext"], takes,
            "v1, {driver} driver: {init}"
        );
        drop(client.stdin.take());
        let status = guard("the agent's exit", client.child.wait())
            .await
            .unwrap();
        assert!(status.success(), "acp-bash exited with {status}");
    }
}

/// What the v2 face advertises holds: a v2 prompt's image reaches the model (an OpenAI
/// `image_url` part after the prompt's text, in its user message), as on the v1 face.
#[tokio::test]
async fn a_v2_prompts_image_reaches_the_model() {
    use crate::support::fake_model::{openai, FakeModel};
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAcCBlCwAAAABJRU5ErkJggg==";
    let (_tmp, dir) = temp_dir();
    let fake = FakeModel::start(vec![openai::reply(&["A dot."], &[])]).await;
    let base = format!("{}/v1", fake.base);
    let mut client = V2Client::start_with_env(
        &["--model", "openai:fake", "--base-url", &base],
        &[("OPENAI_API_KEY", "sk-test-v2-image")],
    );
    client.initialize().await;
    let session = client.new_session(&dir).await;
    let id = client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": "what is this?"},
                {"type": "image", "mimeType": "image/png", "data": PNG}]}),
        )
        .await;
    let answer = client.answer(id).await;
    assert!(answer["result"]["messageId"].is_string(), "{answer}");
    client
        .until(|m| {
            is_state(m, &session, "idle") && m["params"]["update"].get("stopReason").is_some()
        })
        .await;
    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let user = requests[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .cloned()
        .unwrap();
    let parts = user["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{user}"));
    assert!(
        parts[0]["text"]
            .as_str()
            .unwrap()
            .ends_with("what is this?"),
        "{user}"
    );
    assert_eq!(
        parts[1],
        json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}})
    );
    client.finish().await;
}

/// `session/resume` on the v2 face, in a later agent process, replays a prompt's image as a
/// `user_message` with the `image` block the user gave, after the prompt's text (the record
/// keeps it: `notes/2026-12-06-images-on-load.md`); the transcript stays within the v2 schema.
#[tokio::test]
async fn a_v2_resume_replays_the_users_image() {
    use crate::support::fake_model::{openai, FakeModel};
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAcCBlCwAAAABJRU5ErkJggg==";
    let (tmp, dir) = temp_dir();
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let fake = FakeModel::start(vec![openai::reply(&["A dot."], &[])]).await;
    let base = format!("{}/v1", fake.base);
    let args = [
        "--state-dir",
        state.to_str().unwrap(),
        "--model",
        "openai:fake",
        "--base-url",
        &base,
    ];
    let env = [("OPENAI_API_KEY", "sk-test-v2-resume-image")];
    let mut client = V2Client::start_with_env(&args, &env);
    client.initialize().await;
    let session = client.new_session(&dir).await;
    client
        .request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": "what is this?"},
                {"type": "image", "mimeType": "image/png", "data": PNG}]}),
        )
        .await;
    client
        .until(|m| {
            is_state(m, &session, "idle") && m["params"]["update"].get("stopReason").is_some()
        })
        .await;
    client.finish().await;

    let mut client = V2Client::start_with_env(&args, &env);
    client.initialize().await;
    let id = client
        .request(
            "session/resume",
            json!({"sessionId": session, "cwd": dir, "mcpServers": [],
                   "replayFrom": {"type": "start"}}),
        )
        .await;
    let mut replayed = Vec::new();
    loop {
        let message = client.next().await;
        if message["id"] == id {
            break;
        }
        replayed.push(message["params"]["update"].clone());
    }
    let user: Vec<Value> = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message")
        .flat_map(|u| u["content"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(
        user,
        [
            json!({"type": "text", "text": "what is this?"}),
            json!({"type": "image", "mimeType": "image/png", "data": PNG}),
        ],
        "{replayed:#?}"
    );
    client.finish().await;
}
