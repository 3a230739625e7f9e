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
    let (mut out, stderr) = converse(&PROTOCOL_SERVE_ARGS, &[], &[initialize(0, &params)], true);
    assert_eq!(out.len(), 1, "one answer: {out:?}");
    (out.remove(0), stderr)
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

/// `lines` written to a started `acp-bash serve ARGS` (ENVS set), each one only after the
/// answer to the one before when `wait_for_answers` (else all at once), then stdin closed: every
/// line the agent wrote on stdout, and its stderr.
fn converse(
    args: &[&str],
    envs: &[(&str, &str)],
    lines: &[Value],
    wait_for_answers: bool,
) -> (Vec<Value>, String) {
    let mut child = Command::new(binary())
        .args(args)
        .envs(envs.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start acp-bash serve");
    // A hang guard: an agent that never answers is killed, and the read below fails.
    let (done, watchdog) = std::sync::mpsc::channel::<()>();
    let pid = child.id() as libc::pid_t;
    let watchdog = std::thread::spawn(move || {
        if watchdog
            .recv_timeout(std::time::Duration::from_secs(120))
            .is_err()
        {
            // SAFETY: kill(2) of our own child, not yet reaped (this thread is joined first).
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut out = Vec::new();
    let mut read_one = |out: &mut Vec<Value>| {
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read a line");
        assert!(
            !line.is_empty(),
            "the agent closed stdout (or hung for 2 minutes and was killed) before answering"
        );
        out.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
    };
    if wait_for_answers {
        for line in lines {
            writeln!(stdin, "{line}").expect("write a line");
            read_one(&mut out);
        }
    } else {
        let all: String = lines.iter().map(|line| format!("{line}\n")).collect();
        stdin.write_all(all.as_bytes()).expect("write the lines");
    }
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("read the rest");
    let _ = done.send(());
    watchdog.join().expect("the hang guard");
    out.extend(
        rest.lines().map(|line| {
            serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"))
        }),
    );
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    assert!(child.wait().expect("wait").success(), "{stderr}");
    (out, stderr)
}

fn initialize(id: u64, params: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params})
}

/// A case of the initialize test: its name, the agent's arguments and environment, the
/// client's `initialize` parameters.
type InitializeCase<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)], &'a Value);

/// The answers to request `id` among `lines`.
fn answers_to(lines: &[Value], id: u64) -> Vec<&Value> {
    lines
        .iter()
        .filter(|line| line.get("method").is_none() && line["id"] == id)
        .collect()
}

/// The SDK answers `initialize` as it does every request (no answer before the runtime:
/// `notes/2026-12-06-conventional-build.md`): once per request, the same answer to a second
/// `initialize` on the same connection, and what each client and agent kind needs: Zed (the
/// card), a plain client, a client that runs terminal auth, an agent with and without a store,
/// a model agent (auth methods, embedded context).
#[test]
fn initialize_is_answered_once_per_request_as_each_client_and_agent_kind_needs() {
    as_root_and_nobody(
        "acp::startup::initialize_is_answered_once_per_request_as_each_client_and_agent_kind_needs",
        || {
            let state = tempfile::tempdir().expect("a state directory");
            let state_dir = state.path().to_str().expect("UTF-8").to_string();
            let zed = json!({"protocolVersion": 1, "clientCapabilities": {
                "fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true,
                "_meta": {"terminal_output": true}}, "clientInfo": {"name": "zed", "version": "0"}});
            let plain = json!({"protocolVersion": 1, "clientCapabilities": {}});
            let terminal_auth = json!({"protocolVersion": 1,
                "clientCapabilities": {"auth": {"terminal": true}}});
            let with_store: Vec<&str> = vec![
                "serve",
                "--sandbox",
                "full",
                "--state-dir",
                &state_dir,
                "--log-level",
                "acp_bash=debug",
            ];
            let model: Vec<&str> = vec![
                "serve",
                "--sandbox",
                "full",
                "--no-history",
                "--log-level",
                "acp_bash=debug",
                "--model",
                "openai:early-test",
                "--base-url",
                "http://127.0.0.1:9/v1",
            ];
            // Without a key a model agent advertises its login method (an auth method).
            let no_key = [
                ("XDG_CONFIG_HOME", "/nonexistent/acp-bash-tests"),
                ("OPENAI_API_KEY", ""),
            ];
            let cases: Vec<InitializeCase> = vec![
                ("zed, no store", &PROTOCOL_SERVE_ARGS, &[], &zed),
                ("plain, no store", &PROTOCOL_SERVE_ARGS, &[], &plain),
                ("zed, a store", &with_store, &[], &zed),
                ("model, plain", &model, &no_key, &plain),
                ("model, terminal auth", &model, &no_key, &terminal_auth),
            ];
            for (case, args, envs, params) in cases {
                let lines = [initialize(0, params), initialize(1, params)];
                let (out, _) = converse(args, envs, &lines, true);
                let first = answers_to(&out, 0);
                assert_eq!(first.len(), 1, "{case}: answered once: {out:?}");
                let second = answers_to(&out, 1);
                assert_eq!(second.len(), 1, "{case}: {out:?}");
                assert!(
                    first[0]["result"]["agentInfo"]["name"] == "acp-bash",
                    "{case}: {out:?}"
                );
                assert_eq!(first[0]["result"], second[0]["result"], "{case}");
                assert_eq!(first[0]["jsonrpc"], "2.0", "{case}");
                // Each case shows what it is there for.
                let result = &first[0]["result"];
                let auth_methods = result["authMethods"].as_array().map_or(0, Vec::len);
                assert_eq!(
                    auth_methods > 0,
                    case.starts_with("model"),
                    "{case}: {result}"
                );
                let loads = result["agentCapabilities"]["loadSession"] == true;
                assert_eq!(loads, case.ends_with("a store"), "{case}: {result}");
            }
        },
    );
}

/// A client that sends its next requests without waiting for the `initialize` answer: the
/// `initialize` answer comes first, then the rest in order, each answered once.
#[test]
fn requests_pipelined_behind_the_first_initialize_are_served_in_order() {
    let params = json!({"protocolVersion": 1, "clientCapabilities": {}});
    let cwd = std::env::temp_dir();
    let lines = [
        initialize(0, &params),
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
               "params": {"cwd": cwd, "mcpServers": []}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
               "params": {"cwd": cwd, "mcpServers": []}}),
    ];
    let (out, _) = converse(&PROTOCOL_SERVE_ARGS, &[], &lines, false);
    let ids: Vec<&Value> = out
        .iter()
        .filter(|line| line.get("method").is_none())
        .map(|line| &line["id"])
        .collect();
    assert_eq!(ids, [&json!(0), &json!(1), &json!(2)], "{out:?}");
    for id in [1, 2] {
        assert!(
            answers_to(&out, id)[0]["result"]["sessionId"].is_string(),
            "{out:?}"
        );
    }
}

/// Whatever comes first that is not a v1 `initialize` is answered by the connection: a v2
/// `initialize` (the v2 face), a request before `initialize`, a line that is not JSON.
#[test]
fn any_other_first_line_is_answered_by_the_connection_as_before() {
    let not_json = Value::String("not json".into());
    let cases = [
        (
            "v2",
            initialize(
                0,
                &json!({"protocolVersion": 2, "info": {"name": "t", "version": "0"},
                        "capabilities": {}}),
            ),
        ),
        (
            "session/new first",
            json!({"jsonrpc": "2.0", "id": 0, "method": "session/new",
                   "params": {"cwd": "/", "mcpServers": []}}),
        ),
        ("a JSON string, not a message", not_json),
    ];
    for (case, first) in cases {
        let (out, _) = converse(&PROTOCOL_SERVE_ARGS, &[], &[first], true);
        assert_eq!(out.len(), 1, "{case}: one answer: {out:?}");
        match case {
            "v2" => assert_eq!(out[0]["result"]["protocolVersion"], 2, "{out:?}"),
            _ => assert!(out[0]["error"]["code"].is_i64(), "{case}: {out:?}"),
        }
    }
}

/// An agent stopped before its client said anything: SIGTERM ends it at once (with exit code
/// 143 once its handler is installed, by the signal before that), and it writes nothing. The
/// wait below closes its stdin right after the signal, as a client that kills its agent does:
/// that EOF must not turn the signal's 143 into exit 0 (it did, 15 in 100 under load).
#[test]
fn sigterm_before_the_first_line_ends_the_agent_at_once() {
    let mut child = Command::new(binary())
        .args(PROTOCOL_SERVE_ARGS)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start acp-bash serve");
    // Best when it waits for its stdin: a thread of its runtime in an epoll wait (the wait
    // channels say so, where this user may read them).
    let tasks = format!("/proc/{}/task", child.id());
    let polling = || {
        std::fs::read_dir(&tasks).is_ok_and(|tasks| {
            tasks.flatten().any(|task| {
                std::fs::read_to_string(task.path().join("wchan"))
                    .is_ok_and(|w| w.contains("epoll"))
            })
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !polling() && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) of our own child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    // A hang guard: an agent that outlives SIGTERM by a minute is killed, and fails below.
    let (done, guard) = std::sync::mpsc::channel::<()>();
    let guard = std::thread::spawn(move || {
        if guard
            .recv_timeout(std::time::Duration::from_secs(60))
            .is_err()
        {
            // SAFETY: as above; the waiting thread reaps it only after this.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let status = child.wait().expect("wait");
    let _ = done.send(());
    guard.join().expect("the hang guard");
    use std::os::unix::process::ExitStatusExt as _;
    assert!(
        status.code() == Some(143) || status.signal() == Some(libc::SIGTERM),
        "{status:?}"
    );
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read stdout");
    assert_eq!(out, "", "nothing on stdout");
}
