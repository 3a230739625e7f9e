//! The bridge: maps the provider-neutral presentation of a bash call ([`CallView`],
//! [`ResultView`]) to ACP `tool_call` / `tool_call_update` values, gated on what the client said it
//! can render.
//!
//! Owns: the card path (Zed's `_meta.terminal_info` / `terminal_output` / `terminal_exit`
//! convention, `shared/notes/zed-terminal-card.md`), the console fallback (a one-line title, a
//! live console view, the final console block), the `rawInput` echo (cut to a few KiB) and the
//! `rawOutput` status every final update carries, and the agent message a prompt with nothing
//! to run gets. Pure: no I/O, no
//! processes, no clock; every function here is a value-to-value mapping, unit-tested below.
//! Must not touch: how output is produced or streamed (that is [`super::stream`]), the markers text
//! (the presentation parses it).

use agent_client_protocol::v1::schema::{
    ClientCapabilities, Content, ContentBlock, ContentChunk, Meta, SessionMode, SessionModeState,
    SessionUpdate, Terminal, ToolCall, ToolCallContent, ToolCallId, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use agent_client_protocol::{Error, ErrorCode};
use serde_json::{json, Value};

use crate::classify::{CallKind, Classified};
use crate::exec::{Exit, SessionError};
use crate::present::script::{self, MAX_ECHO_BYTES};
use crate::present::stream::LiveUpdate;
use crate::present::{CallView, ResultView};
use crate::sandbox;

/// What the client said it can render, remembered per connection from `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientFeatures {
    /// `clientCapabilities._meta.terminal_output == true`: the client renders the terminal card
    /// (Zed). Only this turns the card path on.
    pub terminal_output: bool,
    /// `clientCapabilities.terminal`: the client can run `terminal/create` itself. Remembered, but
    /// acp-bash never asks the client to run commands, so it changes nothing on the wire.
    pub terminal: bool,
    /// `clientCapabilities.session.compaction`: the client shows `compaction_update`s (else a
    /// compaction is told as the agent's text).
    pub compaction: bool,
    /// `clientCapabilities._meta.acp_bash_notices == true` (acp-bash's own `run`): on the card,
    /// acp-bash's notices about a run come as updates of their own ([`notice_update`]) instead
    /// of lines in the terminal's output, so that the client can show them apart (on stderr).
    pub notices_apart: bool,
}

impl ClientFeatures {
    /// A client that renders Zed's terminal card (`_meta.terminal_output`).
    pub const CARD: ClientFeatures = ClientFeatures {
        terminal_output: true,
        terminal: true,
        compaction: false,
        notices_apart: false,
    };
    /// A client without the card: it gets the console block.
    pub const PLAIN: ClientFeatures = ClientFeatures {
        terminal_output: false,
        terminal: false,
        compaction: false,
        notices_apart: false,
    };

    /// Reads the features from an `initialize` request's capabilities.
    pub fn from_capabilities(caps: &ClientCapabilities) -> Self {
        ClientFeatures {
            terminal_output: caps
                .meta
                .as_ref()
                .and_then(|meta| meta.get("terminal_output"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            terminal: caps.terminal,
            compaction: caps
                .session
                .as_ref()
                .is_some_and(|session| session.compaction.is_some()),
            notices_apart: caps
                .meta
                .as_ref()
                .and_then(|meta| meta.get(NOTICES_APART))
                .and_then(Value::as_bool)
                .unwrap_or(false),
        }
    }

    /// Whether calls are shown as a live terminal card (else as a console block).
    pub fn card(&self) -> bool {
        self.terminal_output
    }

    /// The features `view`'s call is shown with: a classified call (a read, a search, a
    /// listing) is never a terminal card; its output is text content, for every client.
    pub fn for_view(self, view: &CallView) -> ClientFeatures {
        match view.classified {
            Some(_) => ClientFeatures {
                terminal_output: false,
                ..self
            },
            None => self,
        }
    }
}

/// The ACP kind of a classified call: a listing is a read (ACP has no kind of its own for it).
pub fn tool_kind(kind: CallKind) -> ToolKind {
    match kind {
        CallKind::Read | CallKind::List => ToolKind::Read,
        CallKind::Search => ToolKind::Search,
    }
}

/// A classified call's locations: the absolute paths it names, and the line where it names one.
pub fn locations(classified: &Classified) -> Vec<ToolCallLocation> {
    classified
        .locations
        .iter()
        .map(|location| ToolCallLocation::new(location.path.clone()).line(location.line))
        .collect()
}

/// A session that could not be made is the client's mistake: `invalid_params`, with the reason
/// as the message and the directory as `data.cwd` (as acp-bash's own agent answers), so that a
/// `session/new` handler can write `engine.session(&request.cwd)?` (a request handler's `Err` is
/// sent as the error response).
impl From<SessionError> for Error {
    fn from(error: SessionError) -> Error {
        let cwd = match &error {
            SessionError::NotAbsolute(path) | SessionError::NotADirectory(path) => path,
        };
        Error::new(ErrorCode::INVALID_PARAMS, error.to_string())
            .data(json!({ "cwd": cwd.to_string_lossy() }))
    }
}

/// The terminal id of a call's card: the tool-call id itself (unique per connection, never reused).
pub fn terminal_id(call_id: &ToolCallId) -> String {
    call_id.0.to_string()
}

fn meta(value: Value) -> Meta {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("_meta values are built as objects"),
    }
}

fn text_block(text: &str) -> ToolCallContent {
    ToolCallContent::Content(Content::new(text.to_string()))
}

/// The content a call starts with: the description (if any), then the terminal block on the card
/// path. The description comes first so that Zed shows it above the card.
fn call_content(
    call_id: &ToolCallId,
    view: &CallView,
    features: ClientFeatures,
) -> Vec<ToolCallContent> {
    let mut content = Vec::new();
    if let Some(description) = view.description.as_deref().filter(|d| !d.is_empty()) {
        content.push(text_block(description));
    }
    if features.card() {
        content.push(ToolCallContent::Terminal(Terminal::new(terminal_id(
            call_id,
        ))));
    }
    content
}

/// The title a client shows: the whole command (cut to a few KiB) on Zed's card, which shows it
/// as a bash block; one line for every other client ([`CallView::one_line_title`]).
pub fn title(view: &CallView, features: ClientFeatures) -> String {
    if let Some(classified) = &view.classified {
        classified.title.clone()
    } else if features.card() {
        view.title.clone()
    } else {
        view.one_line_title.clone()
    }
}

/// The `tool_call` that opens a call: `in_progress`, kind `execute`, titled with the command
/// ([`title`]), `rawInput` `{"command"}` cut to [`MAX_ECHO_BYTES`] (the whole command runs; only
/// the echo is cut).
///
/// On the card path it carries the terminal block and `_meta.terminal_info{terminal_id, cwd}`.
/// A classified call ([`CallView::classified`]) is of its kind (`read`, `search`), titled `Read
/// f`, `Search 'q' in p`, `List p`, with `locations`, and never a card.
pub fn tool_call(
    call_id: &ToolCallId,
    command: &str,
    view: &CallView,
    features: ClientFeatures,
) -> ToolCall {
    let features = features.for_view(view);
    if let Some(classified) = &view.classified {
        return ToolCall::new(call_id.clone(), title(view, features))
            .kind(tool_kind(classified.kind))
            .status(ToolCallStatus::InProgress)
            .content(call_content(call_id, view, features))
            .locations(locations(classified))
            .raw_input(json!({ "command": script::cut(command, MAX_ECHO_BYTES) }));
    }
    let call = ToolCall::new(call_id.clone(), title(view, features))
        .kind(ToolKind::Execute)
        .status(ToolCallStatus::InProgress)
        .content(call_content(call_id, view, features))
        .raw_input(json!({ "command": script::cut(command, MAX_ECHO_BYTES) }));
    if features.card() {
        call.meta(meta(json!({
            "terminal_info": {
                "terminal_id": terminal_id(call_id),
                "cwd": view.cwd.to_string_lossy(),
            }
        })))
    } else {
        call
    }
}

/// `call` (a card's `tool_call`) with the process it runs as in `_meta.terminal_info`: `pid`,
/// the host pid of the process acp-bash forked for the command (the shell, or with a PID
/// namespace the namespace's first process, whose child the shell is), and `pgid`, its process
/// group (the same number: it leads its group), which holds the whole command: `kill -KILL
/// -PGID` from outside stops it. A call without the card's `_meta` is returned as it is.
pub fn with_process(mut call: ToolCall, pid: u32) -> ToolCall {
    let info = call
        .meta
        .as_mut()
        .and_then(|meta| meta.get_mut("terminal_info"))
        .and_then(Value::as_object_mut);
    if let Some(info) = info {
        info.insert("pid".to_string(), json!(pid));
        info.insert("pgid".to_string(), json!(pid));
    }
    call
}

/// A live-output update for the card: only `_meta.terminal_output{terminal_id, data}`, no content
/// (content would replace the card). Zed appends each `data` to the card.
pub fn output_update(call_id: &ToolCallId, data: &str) -> ToolCallUpdate {
    ToolCallUpdate::new(call_id.clone(), ToolCallUpdateFields::new()).meta(meta(json!({
        "terminal_output": { "terminal_id": terminal_id(call_id), "data": data }
    })))
}

/// The `clientCapabilities._meta` key with which a client asks for acp-bash's notices apart
/// ([`ClientFeatures::notices_apart`]).
pub const NOTICES_APART: &str = "acp_bash_notices";

/// The `_meta` key of a notice update ([`notice_update`]).
pub const NOTICE_META: &str = "acp_bash_notice";

/// acp-bash's notice `text` about call `call_id`'s run, apart from its output (for a client
/// that asked, [`ClientFeatures::notices_apart`]): only `_meta.acp_bash_notice`, no content
/// (content would replace the card).
pub fn notice_update(call_id: &ToolCallId, text: &str) -> ToolCallUpdate {
    ToolCallUpdate::new(call_id.clone(), ToolCallUpdateFields::new())
        .meta(meta(json!({ NOTICE_META: text })))
}

/// A live console view for a client without the card: content = the description (kept, since
/// content replaces what the call had) and the console block of the last lines; no status.
pub fn console_update(call_id: &ToolCallId, view: &CallView, console: &str) -> ToolCallUpdate {
    let mut content = call_content(call_id, view, ClientFeatures::default());
    content.push(text_block(console));
    ToolCallUpdate::new(
        call_id.clone(),
        ToolCallUpdateFields::new().content(content),
    )
}

/// The update for one piece of live output: appended to the card ([`output_update`]) or a new
/// console view ([`console_update`]).
pub fn live_update(call_id: &ToolCallId, view: &CallView, update: &LiveUpdate) -> ToolCallUpdate {
    match update {
        LiveUpdate::Append(data) => output_update(call_id, data),
        LiveUpdate::Replace(console) => console_update(call_id, view, console),
    }
}

/// How a call ended, as data (`rawOutput`), so that a client shows the status even when it cuts
/// the text: `{exit_code, signal, timed_out, cancelled, truncated, full_output, cwd,
/// duration_ms}`, `null` where a value does not apply or is not known (everything but `cwd` when
/// the result could not be read). `cwd` is where the command ran. No key is named `output`,
/// `stdout`, `text` or `result`: acpx would then print only that key's value.
pub fn raw_output(view: &CallView, result: &ResultView) -> Value {
    let cwd = view.cwd.to_string_lossy();
    let Some(terminal) = result.terminal() else {
        return json!({
            "exit_code": null, "signal": null, "timed_out": null, "cancelled": null,
            "truncated": null, "full_output": null, "cwd": cwd, "duration_ms": null,
        });
    };
    let status = &terminal.status;
    let exit_code = match status.exit {
        Exit::Code(code) => Some(code),
        Exit::Signal(_) => None,
    };
    json!({
        "exit_code": exit_code,
        "signal": terminal.exit.signal,
        "timed_out": status.timed_out_after.is_some(),
        "cancelled": status.cancelled,
        "truncated": status.truncation.is_some(),
        "full_output": status.truncation.as_ref().and_then(|t| t.full_output.as_deref()),
        "cwd": cwd,
        "duration_ms": terminal.duration.map(|d| d.as_millis() as u64),
    })
}

/// The agent message a prompt gets when it holds nothing to run: `text` as one text chunk.
pub fn agent_message(text: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from(text.to_string())))
}

/// The status a finished call shows: `completed` for exit 0, `failed` for anything else
/// (a non-zero exit, a signal, a result the presentation could not read).
pub fn final_status(result: &ResultView) -> ToolCallStatus {
    match result {
        ResultView::Terminal { terminal, .. } if terminal.exit.success => ToolCallStatus::Completed,
        _ => ToolCallStatus::Failed,
    }
}

/// The update that closes a call. Both paths carry [`raw_output`].
///
/// - Card path: `status` and `_meta.terminal_exit{terminal_id, exit_code, signal}` and NO content,
///   so the card stays. (If the presentation could not read the result as a terminal, the card is
///   kept and the text is added after it.)
/// - Fallback path: `status` and content = the description (kept, since content replaces what
///   the call had) and the output as a ```` ```console ```` block ending with the status markers.
///   A classified call always takes this path: its output is text content for every client.
pub fn final_update(
    call_id: &ToolCallId,
    view: &CallView,
    result: &ResultView,
    features: ClientFeatures,
) -> ToolCallUpdate {
    let features = features.for_view(view);
    let fields = ToolCallUpdateFields::new()
        .status(final_status(result))
        .raw_output(raw_output(view, result));
    match (features.card(), result) {
        (true, ResultView::Terminal { terminal, .. }) => {
            ToolCallUpdate::new(call_id.clone(), fields).meta(meta(json!({
                "terminal_exit": {
                    "terminal_id": terminal_id(call_id),
                    "exit_code": terminal.exit.exit_code,
                    "signal": terminal.exit.signal,
                }
            })))
        }
        (true, ResultView::Text { console }) => {
            let mut content = call_content(call_id, view, features);
            content.push(text_block(console));
            ToolCallUpdate::new(call_id.clone(), fields.content(content))
        }
        (false, result) => {
            let mut content = call_content(call_id, view, features);
            content.push(text_block(result.console()));
            ToolCallUpdate::new(call_id.clone(), fields.content(content))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::exec::RunStatus;
    use crate::present::{ExitView, TerminalView};
    use agent_client_protocol::v1::schema::{SessionNotification, SessionUpdate};

    const ZED: ClientFeatures = ClientFeatures::CARD;
    const PLAIN: ClientFeatures = ClientFeatures::PLAIN;

    #[test]
    fn a_session_error_is_an_invalid_params_error_that_names_the_directory() {
        let error = Error::from(SessionError::NotAbsolute(PathBuf::from("rel/dir")));
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(
            error.message,
            "cwd must be an absolute path, got \"rel/dir\""
        );
        assert_eq!(error.data, Some(json!({ "cwd": "rel/dir" })));
        let error = Error::from(SessionError::NotADirectory(PathBuf::from("/no/such")));
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert!(error.message.contains("existing directory"), "{error:?}");
        assert_eq!(error.data, Some(json!({ "cwd": "/no/such" })));
    }

    fn id() -> ToolCallId {
        ToolCallId::new("call-1-1")
    }

    fn view(description: Option<&str>) -> CallView {
        CallView {
            title: "make test".into(),
            one_line_title: "make test".into(),
            echo: String::new(),
            description: description.map(str::to_string),
            cwd: PathBuf::from("/home/me/proj"),
            classified: None,
        }
    }

    fn result(exit_code: Option<u32>, signal: Option<&str>) -> ResultView {
        ResultView::Terminal {
            terminal: TerminalView {
                cwd: PathBuf::from("/home/me/proj"),
                output: "ok\n".into(),
                exit: ExitView {
                    exit_code,
                    signal: signal.map(str::to_string),
                    success: exit_code == Some(0),
                },
                status: match (exit_code, signal) {
                    (Some(code), _) => RunStatus::exited(code as i32),
                    (None, _) => RunStatus {
                        exit: crate::exec::Exit::Signal(9),
                        ..RunStatus::exited(0)
                    },
                },
                duration: Some(std::time::Duration::from_millis(1234)),
            },
            console: "```console\nok\n[exit code: 0]\n```".into(),
        }
    }

    /// The update as it goes on the wire.
    fn wire(update: SessionUpdate) -> Value {
        serde_json::to_value(SessionNotification::new("sess-1", update)).unwrap()["update"].clone()
    }

    #[test]
    fn features_come_from_meta_terminal_output_only() {
        let zed: ClientCapabilities = serde_json::from_value(json!({
            "fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true,
            "auth": {"terminal": true}, "_meta": {"terminal_output": true, "terminal-auth": true}
        }))
        .unwrap();
        assert_eq!(ClientFeatures::from_capabilities(&zed), ZED);
        let terminal_only: ClientCapabilities =
            serde_json::from_value(json!({"terminal": true})).unwrap();
        let features = ClientFeatures::from_capabilities(&terminal_only);
        assert!(!features.card() && features.terminal);
        let odd: ClientCapabilities =
            serde_json::from_value(json!({"_meta": {"terminal_output": "yes"}})).unwrap();
        assert!(!ClientFeatures::from_capabilities(&odd).card());
    }

    #[test]
    fn card_tool_call_has_description_then_terminal_and_terminal_info() {
        let call = tool_call(&id(), "make test", &view(Some("Run the tests")), ZED);
        assert_eq!(
            wire(SessionUpdate::ToolCall(call)),
            json!({
                "sessionUpdate": "tool_call", "toolCallId": "call-1-1", "title": "make test",
                "kind": "execute", "status": "in_progress",
                "content": [
                    {"type": "content", "content": {"type": "text", "text": "Run the tests"}},
                    {"type": "terminal", "terminalId": "call-1-1"}
                ],
                "rawInput": {"command": "make test"},
                "_meta": {"terminal_info": {"terminal_id": "call-1-1", "cwd": "/home/me/proj"}}
            })
        );
    }

    #[test]
    fn fallback_tool_call_has_only_the_description_and_no_meta() {
        let call = wire(SessionUpdate::ToolCall(tool_call(
            &id(),
            "make test",
            &view(Some("Run")),
            PLAIN,
        )));
        assert_eq!(
            call["content"],
            json!([{"type": "content", "content": {"type": "text", "text": "Run"}}])
        );
        assert!(call.get("_meta").is_none());
        let bare = wire(SessionUpdate::ToolCall(tool_call(
            &id(),
            "make test",
            &view(None),
            PLAIN,
        )));
        assert!(bare.get("content").is_none(), "{bare}");
    }

    #[test]
    fn output_update_is_only_meta() {
        let update = wire(SessionUpdate::ToolCallUpdate(output_update(
            &id(),
            "héllo\x1b[0m\n",
        )));
        assert_eq!(
            update,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "call-1-1",
                   "_meta": {"terminal_output": {"terminal_id": "call-1-1", "data": "héllo\x1b[0m\n"}}})
        );
    }

    #[test]
    fn card_final_update_has_status_and_exit_and_no_content() {
        let ok = wire(SessionUpdate::ToolCallUpdate(final_update(
            &id(),
            &view(Some("d")),
            &result(Some(0), None),
            ZED,
        )));
        assert_eq!(
            ok,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "call-1-1", "status": "completed",
                   "rawOutput": {"exit_code": 0, "signal": null, "timed_out": false, "cancelled": false,
                                 "truncated": false, "full_output": null, "cwd": "/home/me/proj",
                                 "duration_ms": 1234},
                   "_meta": {"terminal_exit": {"terminal_id": "call-1-1", "exit_code": 0, "signal": null}}})
        );
        let failed = wire(SessionUpdate::ToolCallUpdate(final_update(
            &id(),
            &view(None),
            &result(Some(2), None),
            ZED,
        )));
        assert_eq!(failed["status"], "failed");
        assert_eq!(failed["_meta"]["terminal_exit"]["exit_code"], 2);
        let killed = wire(SessionUpdate::ToolCallUpdate(final_update(
            &id(),
            &view(None),
            &result(None, Some("SIGKILL")),
            ZED,
        )));
        assert_eq!(killed["status"], "failed");
        assert_eq!(
            killed["_meta"]["terminal_exit"],
            json!({"terminal_id": "call-1-1", "exit_code": null, "signal": "SIGKILL"})
        );
        assert!(killed.get("content").is_none());
    }

    #[test]
    fn fallback_final_update_keeps_the_description_and_adds_the_console_block() {
        let done = wire(SessionUpdate::ToolCallUpdate(final_update(
            &id(),
            &view(Some("d")),
            &result(Some(0), None),
            PLAIN,
        )));
        assert_eq!(
            done,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "call-1-1", "status": "completed",
            "rawOutput": {"exit_code": 0, "signal": null, "timed_out": false, "cancelled": false,
                          "truncated": false, "full_output": null, "cwd": "/home/me/proj",
                          "duration_ms": 1234},
            "content": [
                {"type": "content", "content": {"type": "text", "text": "d"}},
                {"type": "content", "content": {"type": "text", "text": "```console\nok\n[exit code: 0]\n```"}}
            ]})
        );
    }

    #[test]
    fn a_multi_line_command_is_one_line_for_plain_clients_and_whole_on_the_card() {
        let call = crate::tool::BashCall::new("mkdir -p out\ntouch out/a\nls out");
        let view = crate::present::present_call(&call, std::path::Path::new("/p"));
        let plain = wire(SessionUpdate::ToolCall(tool_call(
            &id(),
            call.command(),
            &view,
            PLAIN,
        )));
        assert_eq!(plain["title"], "mkdir -p out … (2 more lines)");
        let card = wire(SessionUpdate::ToolCall(tool_call(
            &id(),
            call.command(),
            &view,
            ZED,
        )));
        assert_eq!(card["title"], "mkdir -p out\ntouch out/a\nls out");
        assert_eq!(plain["rawInput"], json!({"command": call.command()}));
    }

    #[test]
    fn a_huge_command_is_cut_in_the_title_and_raw_input() {
        let command = "echo 0123456789abcdef\n".repeat(100_000);
        let call = crate::tool::BashCall::new(command.clone());
        let view = crate::present::present_call(&call, std::path::Path::new("/p"));
        for features in [ZED, PLAIN] {
            let line = serde_json::to_string(&wire(SessionUpdate::ToolCall(tool_call(
                &id(),
                &command,
                &view,
                features,
            ))))
            .unwrap();
            assert!(line.len() < 3 * MAX_ECHO_BYTES, "{} bytes", line.len());
        }
        let raw_input = tool_call(&id(), &command, &view, ZED).raw_input.unwrap();
        let echoed = raw_input["command"].as_str().unwrap();
        assert!(echoed.ends_with("more bytes)"), "{echoed}");
        assert!(command.starts_with(echoed.rsplit_once('\n').unwrap().0));
    }

    #[test]
    fn a_console_view_is_the_description_then_the_block_without_status() {
        let update = wire(SessionUpdate::ToolCallUpdate(live_update(
            &id(),
            &view(Some("d")),
            &LiveUpdate::Replace("```console\n1\n```".into()),
        )));
        assert_eq!(
            update,
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "call-1-1", "content": [
                {"type": "content", "content": {"type": "text", "text": "d"}},
                {"type": "content", "content": {"type": "text", "text": "```console\n1\n```"}}
            ]})
        );
        let append = live_update(&id(), &view(None), &LiveUpdate::Append("x".into()));
        assert_eq!(append, output_update(&id(), "x"));
    }

    #[test]
    fn raw_output_says_how_it_ended_with_null_where_nothing_applies() {
        use crate::exec::Truncation;
        let killed = raw_output(&view(None), &result(None, Some("SIGKILL")));
        assert_eq!(killed["exit_code"], Value::Null);
        assert_eq!(killed["signal"], "SIGKILL");
        let mut cut = result(Some(3), None);
        if let ResultView::Terminal { terminal, .. } = &mut cut {
            terminal.status.truncation = Some(Truncation {
                dropped_bytes: 10,
                full_output: Some("/logs/1.log".into()),
                log_holds_first: None,
            });
            terminal.status.cancelled = true;
            terminal.status.timed_out_after = Some(std::time::Duration::from_secs(1));
            terminal.duration = None;
        }
        assert_eq!(
            raw_output(&view(None), &cut),
            json!({"exit_code": 3, "signal": null, "timed_out": true, "cancelled": true,
                   "truncated": true, "full_output": "/logs/1.log", "cwd": "/home/me/proj",
                   "duration_ms": null})
        );
        let unreadable = ResultView::Text {
            console: "x".into(),
        };
        let raw = raw_output(&view(None), &unreadable);
        assert_eq!(raw["cwd"], "/home/me/proj");
        assert_eq!(raw["exit_code"], Value::Null);
        for value in [killed, raw] {
            let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
            assert_eq!(keys.len(), 8);
            for banned in ["output", "stdout", "text", "result"] {
                assert!(value.get(banned).is_none());
            }
        }
    }

    #[test]
    fn a_prompt_with_nothing_to_run_is_answered_by_a_message() {
        assert_eq!(
            wire(agent_message("type a script")),
            json!({"sessionUpdate": "agent_message_chunk",
                   "content": {"type": "text", "text": "type a script"}})
        );
    }

    /// A model's `sed -n` is a read for every client: kind, title, the file and line as a
    /// location, no terminal, and the output as text on its final update.
    #[test]
    fn a_classified_call_is_a_read_with_its_location_and_its_output_as_text() {
        let call = crate::tool::BashCall::new("sed -n '80,120p' src/a.rs")
            .description("Look")
            .classified(true);
        let view = crate::present::present_call(&call, std::path::Path::new("/p"));
        for features in [ZED, PLAIN] {
            let opened = wire(SessionUpdate::ToolCall(tool_call(
                &id(),
                call.command(),
                &view,
                features,
            )));
            assert_eq!(
                opened,
                json!({"sessionUpdate": "tool_call", "toolCallId": "call-1-1",
                       "title": "Read src/a.rs", "kind": "read", "status": "in_progress",
                       "content": [{"type": "content", "content": {"type": "text", "text": "Look"}}],
                       "locations": [{"path": "/p/src/a.rs", "line": 80}],
                       "rawInput": {"command": "sed -n '80,120p' src/a.rs"}})
            );
            let done = wire(SessionUpdate::ToolCallUpdate(final_update(
                &id(),
                &view,
                &result(Some(0), None),
                features,
            )));
            assert!(done.get("_meta").is_none(), "{done}");
            assert_eq!(done["status"], "completed");
            assert_eq!(
                done["content"][1]["content"]["text"],
                "```console\nok\n[exit code: 0]\n```"
            );
            assert_eq!(title(&view, features), "Read src/a.rs");
        }
        let search = crate::present::present_call(
            &crate::tool::BashCall::new("rg -n foo src").classified(true),
            std::path::Path::new("/p"),
        );
        let opened = wire(SessionUpdate::ToolCall(tool_call(
            &id(),
            "rg -n foo src",
            &search,
            ZED,
        )));
        assert_eq!(opened["kind"], "search");
        assert_eq!(opened["title"], "Search 'foo' in src");
        assert_eq!(opened["locations"], json!([{"path": "/p/src"}]));
        let listing = crate::present::present_call(
            &crate::tool::BashCall::new("ls").classified(true),
            std::path::Path::new("/p"),
        );
        let opened = wire(SessionUpdate::ToolCall(tool_call(
            &id(),
            "ls",
            &listing,
            ZED,
        )));
        assert_eq!(
            (&opened["kind"], &opened["title"]),
            (&json!("read"), &json!("List ."))
        );
        // The same command, not asked to be classified (a user's typed command), is a card.
        let typed = crate::present::present_call(
            &crate::tool::BashCall::new("ls"),
            std::path::Path::new("/p"),
        );
        let opened = wire(SessionUpdate::ToolCall(tool_call(&id(), "ls", &typed, ZED)));
        assert_eq!(opened["kind"], "execute");
        assert!(opened["_meta"]["terminal_info"].is_object());
    }

    #[test]
    fn unreadable_result_is_failed_and_keeps_the_card() {
        let text = ResultView::Text {
            console: "```console\nengine said no\n```".into(),
        };
        let update = wire(SessionUpdate::ToolCallUpdate(final_update(
            &id(),
            &view(None),
            &text,
            ZED,
        )));
        assert_eq!(update["status"], "failed");
        assert_eq!(
            update["content"][0],
            json!({"type": "terminal", "terminalId": "call-1-1"})
        );
        assert_eq!(
            update["content"][1]["content"]["text"],
            "```console\nengine said no\n```"
        );
    }
}

/// The sandbox modes as ACP session modes (Zed shows them as a picker), `current` selected.
/// Each description says what the mode enforces on this machine and what it does not. `off` is
/// offered only when `off_allowed` (the agent was started with `--sandbox off`).
pub fn session_modes(current: sandbox::Mode, off_allowed: bool) -> SessionModeState {
    let modes = sandbox::Mode::offered(off_allowed)
        .into_iter()
        .map(|mode| SessionMode::new(mode.id(), mode.name()).description(sandbox::describe(mode)))
        .collect();
    SessionModeState::new(current.id(), modes)
}

#[cfg(test)]
mod session_mode_tests {
    use super::*;

    #[test]
    fn every_sandbox_mode_is_offered_with_the_current_one_selected() {
        let state = session_modes(sandbox::Mode::ReadOnly, false);
        assert_eq!(&*state.current_mode_id.0, "read-only");
        let ids: Vec<&str> = state.available_modes.iter().map(|m| &*m.id.0).collect();
        assert_eq!(ids, ["workspace", "read-only", "full"]);
        assert!(state
            .available_modes
            .iter()
            .all(|m| m.description.as_deref().is_some_and(|d| !d.is_empty())));
    }

    #[test]
    fn off_is_offered_only_when_the_agent_was_started_with_it() {
        let state = session_modes(sandbox::Mode::Off, true);
        assert_eq!(&*state.current_mode_id.0, "off");
        let ids: Vec<&str> = state.available_modes.iter().map(|m| &*m.id.0).collect();
        assert_eq!(ids, ["workspace", "read-only", "full", "off"]);
        let off = state.available_modes.last().unwrap();
        assert_eq!(off.name, "Sandbox off");
        assert!(off
            .description
            .as_deref()
            .is_some_and(|d| d.contains("no kernel sandbox")));
    }
}
