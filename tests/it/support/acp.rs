//! Helpers for the `acp` and `cli` tests: a client over the real binary, hang guards, readers for
//! the updates a turn produced, and transcript checks.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use acp_bash::acp::client::{AcpClient, ClientProfile};
use agent_client_protocol::v1::schema::{
    ContentBlock, SessionUpdate, ToolCall, ToolCallContent, ToolCallUpdate,
};
use serde_json::Value;

use crate::support::schema::{Direction, WireValidator};

/// The JSON messages `stdout` carries, one a line, as they come: read on a thread of their own
/// until EOF or until the receiver is dropped (lines that are not JSON are passed over).
/// The lines a served agent writes to `stdout`, as they come: read on a task of its own (in the
/// current tokio runtime) until EOF or until the receiver is dropped.
pub fn stdout_lines(
    stdout: tokio::process::ChildStdout,
) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    use tokio::io::AsyncBufReadExt as _;
    let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut reader = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = reader.next_line().await {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // the sandbox tests read it
pub fn json_lines(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<Value> {
    use std::io::BufRead as _;
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if let Ok(value) = serde_json::from_str(&line) {
                if tx.send(value).is_err() {
                    return;
                }
            }
        }
    });
    lines
}

/// The binary under test: the built one, or the one `ACP_BASH_TEST_AGENT_BINARY` names (in the
/// ordinary-user half of `as_root_and_nobody`, its copy where that user can reach it; in the
/// platform lab, the release build, `scripts/lab/lab`'s ACP_BASH_LAB_SERVED).
pub fn binary() -> PathBuf {
    std::env::var_os(crate::support::sandbox::AGENT_BINARY)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_acp-bash")))
}

/// A client for the real binary, serving on stdio, logging at debug level to its stderr.
///
/// `--sandbox full`: these tests are about the protocol, and the other modes may print a notice
/// about the kernel's sandbox support (which differs between machines) before the output.
/// `--no-history`: nothing is kept on disk (the session tests use [`client_with_store`]).
pub fn client(profile: ClientProfile) -> AcpClient {
    AcpClient::new(binary(), PROTOCOL_SERVE_ARGS).profile(profile)
}

/// The arguments of [`client`]'s agent, for tests that start it by hand.
pub const PROTOCOL_SERVE_ARGS: [&str; 6] = [
    "serve",
    "--sandbox",
    "full",
    "--no-history",
    "--log-level",
    "acp_bash=debug",
];

/// Like [`client`], with the sessions kept in the state directory `state_dir`.
pub fn client_with_store(profile: ClientProfile, state_dir: &Path) -> AcpClient {
    AcpClient::new(
        binary(),
        [
            "serve",
            "--sandbox",
            "full",
            "--state-dir",
            state_dir.to_str().expect("a UTF-8 state dir"),
            "--log-level",
            "acp_bash=debug",
        ],
    )
    .profile(profile)
}

/// Runs `conversation` with the real binary (under a hang guard), then checks every line that
/// crossed the pipes against the ACP v1 schema.
pub async fn converse<R>(
    profile: ClientProfile,
    what: &str,
    conversation: impl AsyncFnOnce(
        acp_bash::acp::client::Conversation,
    ) -> agent_client_protocol::Result<R>,
) -> R {
    converse_with(client(profile), what, conversation).await.0
}

/// Runs `conversation` with `client` under the hang guard; a failure panics with the agent's
/// stderr. Every line is checked against the schema. Returns the result and the transcript.
///
/// When the guard fires, the panic says which part hung: the conversation itself (it waits for
/// an answer or an update that does not come; the agent's stdin is still open, so the agent
/// rightly keeps running), or the end after it (the conversation returned and stdin closed,
/// but the agent did not exit). Both look alike from outside ("the conversation does not
/// end"), and telling them apart once took a whole investigation (notes/reliability.md).
pub async fn converse_with<R>(
    client: AcpClient,
    what: &str,
    conversation: impl AsyncFnOnce(
        acp_bash::acp::client::Conversation,
    ) -> agent_client_protocol::Result<R>,
) -> (R, acp_bash::acp::client::Transcript) {
    let transcript = client.transcript();
    let returned = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = returned.clone();
    let run = client.run(async move |c| {
        let result = conversation(c).await;
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
        result
    });
    let result = match tokio::time::timeout(hang_guard(), run).await {
        Ok(result) => result,
        Err(_) => panic!(
            "{what}: still not done after {:?}: {}\nlast lines on the wire:\n{}\n\
             agent stderr (last lines):\n{}",
            hang_guard(),
            match returned.load(std::sync::atomic::Ordering::SeqCst) {
                true =>
                    "the conversation returned and the agent's stdin was closed, \
                         but the agent did not exit",
                false =>
                    "still inside the conversation (waiting for an answer or an \
                          update that did not come; the agent's stdin is still open)",
            },
            last(&transcript.lines(), 12),
            last(&transcript.stderr(), 40),
        ),
    };
    let result = result.unwrap_or_else(|error| {
        panic!(
            "{what}: {error:?}\nagent stderr:\n{}",
            transcript.stderr().join("\n")
        )
    });
    validate_wire(&transcript.lines());
    (result, transcript)
}

/// The last `n` of `lines`, one a line, each cut at 400 characters.
fn last(lines: &[String], n: usize) -> String {
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|line| match line.char_indices().nth(400) {
            Some((at, _)) => format!("{}…", &line[..at]),
            None => line.clone(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A hang guard: generous, never a timing assertion.
// HANG_GUARD stays importable from here (new tests should wait with hang_guard()).
#[allow(unused_imports)]
pub use super::{hang_guard, HANG_GUARD};

pub async fn guard<T>(what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(hang_guard(), future).await {
        Ok(value) => value,
        Err(_) => panic!("{what}: still not done after {:?}", hang_guard()),
    }
}

/// A fresh directory, canonical (so that paths in transcripts compare exactly).
pub fn temp_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().canonicalize().expect("canonical temp dir");
    (dir, path)
}

pub fn tool_call(updates: &[SessionUpdate]) -> &ToolCall {
    updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCall(call) => Some(call),
            _ => None,
        })
        .expect("a tool_call")
}

pub fn tool_call_updates(updates: &[SessionUpdate]) -> Vec<&ToolCallUpdate> {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCallUpdate(update) => Some(update),
            _ => None,
        })
        .collect()
}

/// The `data` of every `terminal_output` update, in order.
pub fn output_chunks(updates: &[SessionUpdate]) -> Vec<String> {
    tool_call_updates(updates)
        .into_iter()
        .filter_map(|u| {
            u.meta
                .as_ref()?
                .get("terminal_output")?
                .get("data")?
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// Everything streamed to the card.
pub fn card_output(updates: &[SessionUpdate]) -> String {
    output_chunks(updates).concat()
}

/// The update that carries the status.
pub fn final_update(updates: &[SessionUpdate]) -> &ToolCallUpdate {
    tool_call_updates(updates)
        .into_iter()
        .rfind(|u| u.fields.status.is_some())
        .expect("a final update with a status")
}

pub fn status(update: &ToolCallUpdate) -> String {
    serde_json::to_value(update.fields.status)
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

pub fn terminal_exit(update: &ToolCallUpdate) -> Option<Value> {
    update.meta.as_ref()?.get("terminal_exit").cloned()
}

/// The text blocks of a content list.
pub fn texts(content: &[ToolCallContent]) -> Vec<String> {
    content
        .iter()
        .filter_map(|c| match c {
            ToolCallContent::Content(c) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The text of every agent message among `updates`, joined.
pub fn agent_text(updates: &[SessionUpdate]) -> String {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The console block of a fallback call's final update.
pub fn console_block(updates: &[SessionUpdate]) -> String {
    let update = final_update(updates);
    texts(
        update
            .fields
            .content
            .as_deref()
            .expect("fallback final update has content"),
    )
    .into_iter()
    .last()
    .expect("a console block")
}

/// Waits until `path` exists (the scripts signal progress by creating files).
pub async fn wait_for_file(path: &Path) {
    guard(&format!("waiting for {}", path.display()), async {
        while !path.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// Waits until a live process runs exactly `argv` with `cwd` as its working directory (the same
/// directory: compared by device and inode through `/proc/PID/cwd`, so a command in its own
/// mount and PID namespaces is found too). For a script that `exec`s: once this returns, the
/// shell has become that program, and a signal reaches the program, not a shell between its
/// fork and its exec.
pub async fn wait_for_exec(argv: &[&str], cwd: &Path) {
    use std::os::unix::fs::MetadataExt;
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let dir = std::fs::metadata(cwd).expect("the directory");
    let found = || {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .any(|entry| {
                let path = entry.path();
                std::fs::read(path.join("cmdline")).is_ok_and(|c| c == wanted)
                    && std::fs::metadata(path.join("cwd"))
                        .is_ok_and(|m| m.dev() == dir.dev() && m.ino() == dir.ino())
                    && entry
                        .file_name()
                        .to_str()
                        .and_then(|pid| pid.parse().ok())
                        .is_some_and(process_alive)
            })
    };
    guard(
        &format!("waiting for {argv:?} in {}", cwd.display()),
        async {
            while !found() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        },
    )
    .await
}

/// Whether a process with this pid still exists (zombies count as gone).
pub fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// Normalises a transcript for a snapshot, changing only what truly varies between runs:
/// - request ids (the SDK sends random UUIDs) become 0, 1, 2… in order of first appearance;
/// - session ids (128 random bits) become `sess-1`, `sess-2`… in order of first appearance;
/// - the temp directory becomes `[TMP]`;
/// - consecutive `terminal_output` updates of one call (their chunking depends on timing) are
///   merged into one;
/// - live console views (content, no status: whether a quick command gets one, and how many,
///   depends on timing) are dropped; see [`normalize_with`] for scripts that wait
///   for one;
/// - `rawOutput.duration_ms` becomes `"[DURATION]"`;
/// - the command list of `available_commands_update` becomes [`COMMANDS_REDACTED`] (a new slash
///   command changes one snapshot, not all: see [`normalize_keeping_commands`]).
pub fn normalize_transcript(lines: &[String], temp: &Path) -> Vec<String> {
    normalize_with(lines, temp, false, false)
}

/// What an `available_commands_update`'s `availableCommands` reads as in every snapshot but one.
pub const COMMANDS_REDACTED: &str = "[THE SLASH COMMANDS: pinned in zed__success.snap]";

/// The normaliser behind the others: `keep_live` keeps the last live console view of each run of
/// them, `keep_modes` keeps the modes' real descriptions (machine-neutral). The command list is
/// redacted.
pub fn normalize_with(
    lines: &[String],
    temp: &Path,
    keep_live: bool,
    keep_modes: bool,
) -> Vec<String> {
    normalize_lines(lines, temp, keep_live, keep_modes, false)
}

/// [`normalize_with`] keeping the advertised command list as it is: for the ONE snapshot that
/// pins it (`zed__success`).
pub fn normalize_keeping_commands(
    lines: &[String],
    temp: &Path,
    keep_live: bool,
    keep_modes: bool,
) -> Vec<String> {
    normalize_lines(lines, temp, keep_live, keep_modes, true)
}

fn normalize_lines(
    lines: &[String],
    temp: &Path,
    keep_live: bool,
    keep_modes: bool,
    keep_commands: bool,
) -> Vec<String> {
    let temp = temp.to_str().expect("utf-8 temp path");
    let temp_dir = std::env::temp_dir();
    let temp_dir = temp_dir.to_str().expect("utf-8 temp dir");
    let mut ids = std::collections::HashMap::<String, usize>::new();
    let mut sessions = std::collections::HashMap::<String, usize>::new();
    let session_id = regex::Regex::new("sess-[0-9a-f]{32}").unwrap();
    let mut out: Vec<(String, Value)> = Vec::new();
    for line in lines {
        let line = session_id.replace_all(line, |found: &regex::Captures| {
            let n = sessions.len() + 1;
            format!("sess-{}", sessions.entry(found[0].to_string()).or_insert(n))
        });
        let (direction, json) = line.split_at(3);
        let mut value: Value =
            serde_json::from_str(&json.replace(temp, "[TMP]")).expect("a JSON line");
        // What a sandbox mode enforces depends on the machine's kernel: its description is
        // checked by tests/acp_modes.rs, not pinned in transcripts.
        if let Some(modes) = value.pointer_mut("/result/modes/availableModes") {
            for mode in modes.as_array_mut().into_iter().flatten() {
                let Some(description) = mode.get("description").and_then(Value::as_str) else {
                    continue;
                };
                mode["description"] = if keep_modes {
                    machine_neutral_description(description, temp_dir).into()
                } else {
                    "[WHAT THIS MACHINE ENFORCES]".into()
                };
            }
        }
        // The same descriptions in the `mode` config option (answers and
        // `config_option_update`).
        for pointer in ["/result/configOptions", "/params/update/configOptions"] {
            let Some(options) = value.pointer_mut(pointer) else {
                continue;
            };
            for option in options.as_array_mut().into_iter().flatten() {
                if option["id"] != "mode" {
                    continue;
                }
                let values = option.get_mut("options").and_then(Value::as_array_mut);
                for choice in values.into_iter().flatten() {
                    let Some(description) = choice.get("description").and_then(Value::as_str)
                    else {
                        continue;
                    };
                    choice["description"] = if keep_modes {
                        machine_neutral_description(description, temp_dir).into()
                    } else {
                        "[WHAT THIS MACHINE ENFORCES]".into()
                    };
                }
            }
        }
        if let Some(id) = value.get("id").cloned() {
            let key = id.to_string();
            let n = ids.len();
            value["id"] = (*ids.entry(key).or_insert(n)).into();
        }
        if !keep_commands {
            if let Some(update) = value.pointer_mut("/params/update") {
                if update["sessionUpdate"] == "available_commands_update" {
                    if let Some(commands) = update.get_mut("availableCommands") {
                        *commands = COMMANDS_REDACTED.into();
                    }
                }
            }
        }
        // A card's process (a host pid) differs on every run.
        for key in ["pid", "pgid"] {
            let pointer = format!("/params/update/_meta/terminal_info/{key}");
            if let Some(pid) = value.pointer_mut(&pointer) {
                if pid.is_number() {
                    *pid = "[PID]".into();
                }
            }
        }
        if let Some(duration) = value.pointer_mut("/params/update/rawOutput/duration_ms") {
            if duration.is_number() {
                *duration = "[DURATION]".into();
            }
        }
        if let Some(call) = console_view(&value) {
            if !keep_live {
                continue;
            }
            if let Some((last_direction, last)) = out.last_mut() {
                if *last_direction == direction && console_view(last).as_ref() == Some(&call) {
                    *last = value;
                    continue;
                }
            }
        }
        if let (Some((last_direction, last)), Some((call, data))) =
            (out.last_mut(), terminal_output(&value))
        {
            if *last_direction == direction {
                if let Some((last_call, _)) = terminal_output(last) {
                    if last_call == call {
                        let merged =
                            &mut last["params"]["update"]["_meta"]["terminal_output"]["data"];
                        *merged = Value::String(format!("{}{}", merged.as_str().unwrap(), data));
                        continue;
                    }
                }
            }
        }
        out.push((direction.to_string(), value));
    }
    out.into_iter()
        .map(|(direction, value)| format!("{direction}{value}"))
        .collect()
}

/// The `toolCallId` when `value` is a live console view: a `tool_call_update` with content and
/// no status.
fn console_view(value: &Value) -> Option<String> {
    if value.get("method")?.as_str()? != "session/update" {
        return None;
    }
    let update = value.get("params")?.get("update")?;
    if update.get("sessionUpdate")? != "tool_call_update"
        || update.get("content").is_none()
        || update.get("status").is_some()
    {
        return None;
    }
    Some(update.get("toolCallId")?.as_str()?.to_string())
}

/// The console views (live updates: content, no status) of a turn's updates, each as the text of
/// its last content block.
pub fn console_views(updates: &[SessionUpdate]) -> Vec<String> {
    tool_call_updates(updates)
        .into_iter()
        .filter(|u| u.fields.status.is_none())
        .filter_map(|u| texts(u.fields.content.as_deref()?).pop())
        .collect()
}

/// A mode's description with the temp dir's path and the kernel-dependent "Not enforced" list
/// replaced.
fn machine_neutral_description(description: &str, temp_dir: &str) -> String {
    let description = description.replace(temp_dir.trim_end_matches('/'), "[TEMP]");
    const NOT_ENFORCED: &str = " Not enforced on this machine: ";
    match description.split_once(NOT_ENFORCED) {
        Some((enforced, rest)) => {
            let tail = rest.rsplit_once(" — ").map_or("", |(_, tail)| tail);
            format!("{enforced}{NOT_ENFORCED}[DEPENDS ON THE KERNEL] — {tail}")
        }
        None => description,
    }
}

/// `(toolCallId, data)` when `value` is a `session/update` carrying only `terminal_output`.
fn terminal_output(value: &Value) -> Option<(String, String)> {
    if value.get("method")?.as_str()? != "session/update" {
        return None;
    }
    let update = value.get("params")?.get("update")?.as_object()?;
    let meta = update.get("_meta")?.as_object()?;
    let only_output = update
        .keys()
        .all(|k| ["sessionUpdate", "toolCallId", "_meta"].contains(&k.as_str()))
        && meta.len() == 1;
    let output = meta.get("terminal_output")?;
    if !only_output {
        return None;
    }
    Some((
        update.get("toolCallId")?.as_str()?.to_string(),
        output.get("data")?.as_str()?.to_string(),
    ))
}

/// Validates every line against the ACP v1 schema (responses against the method they answer).
pub fn validate_wire(lines: &[String]) {
    let mut validator = WireValidator::default();
    for line in lines {
        let direction = match &line[..3] {
            "-> " => Direction::ClientToAgent,
            "<- " => Direction::AgentToClient,
            other => panic!("unexpected transcript prefix {other:?}"),
        };
        if let Err(problem) = validator.check(direction, &line[3..]) {
            panic!("{problem}");
        }
    }
    assert_eq!(validator.unanswered(), vec![], "every request was answered");
}

/// A process name unique to this test's directory, for scripts to `exec -a` with.
///
/// Tests find a command's processes by name rather than by a pid the script prints: inside the
/// sandbox's PID namespace `$$` is not the pid the test sees.
pub fn process_name(dir: &Path) -> String {
    let unique = dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .trim_start_matches('.')
        .to_string();
    format!("acp-bash-test-{unique}")
}

/// Live processes (zombies excluded) whose `argv[0]` is `name`.
pub fn processes_named(name: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| cmdline.split(|b| *b == 0).next() == Some(name.as_bytes()))
        })
        .filter(|pid| process_alive(*pid))
        .collect()
}

/// Waits until a process named `name` runs.
pub async fn wait_for_process(name: &str) {
    guard(&format!("waiting for a process named {name}"), async {
        while processes_named(name).is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// Waits until no process named `name` is left; false if one still runs after [`hang_guard()`].
/// The poll checks the condition; its deadline is only a hang guard (it used to be 1000 rounds
/// of 10 ms, which a loaded machine stretches past nothing and a killed process can outlast).
pub async fn wait_until_no_process(name: &str) -> bool {
    let deadline = tokio::time::Instant::now() + hang_guard();
    while !processes_named(name).is_empty() {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// The updates that are already here, without waiting for more. Right after a request's
/// answer this is every update the agent sent before it: the SDK hands notifications over in
/// the order they crossed the pipe (see `Conversation::prompt_with`), so no quiet period is
/// needed to be sure nothing earlier is still on its way.
pub fn updates_already_here(c: &mut acp_bash::acp::client::Conversation) -> Vec<SessionUpdate> {
    use futures::FutureExt;
    let mut updates = Vec::new();
    while let Some(Some(notification)) = c.next_update().now_or_never() {
        updates.push(notification.update);
    }
    updates
}

/// Replays a turn's updates the way Zed applies them.
pub fn zed_replay(updates: &[SessionUpdate]) -> crate::support::zed_replay::ZedReplay {
    let mut zed = crate::support::zed_replay::ZedReplay::default();
    for update in updates {
        zed.apply(&serde_json::to_value(update).unwrap());
    }
    zed
}
