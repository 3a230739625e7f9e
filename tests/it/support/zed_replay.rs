//! Replays `session/update` notifications the way Zed applies them, to see the card Zed would show.
//!
//! Owns a model of Zed's handling of tool calls and its `_meta` terminal convention, as recorded in
//! `shared/notes/zed-terminal-card.md`:
//! - a display terminal is created only from a `tool_call` whose `_meta.terminal_info.terminal_id`
//!   is set AND whose `content` holds a `{"type":"terminal","terminalId":…}` block with that id;
//!   `terminal_info` on a `tool_call_update` is ignored;
//! - within one update, the normal fields apply first (title, kind, status, `content`), then
//!   `_meta.terminal_output` (its `data` is APPENDED), then `_meta.terminal_exit`;
//! - output or exit for a terminal id not seen yet is buffered and replayed when the terminal
//!   appears (and never shown if it does not);
//! - an update that carries `content` REPLACES the call's content: leaving the terminal block out
//!   removes the card;
//! - a terminal block whose id Zed does not know drops the tool call (or fails the update); an
//!   update for an unknown `toolCallId` shows a failed "Tool call not found" entry.
//!
//! Things Zed would show as failures, or silently ignore, are collected in [`ZedReplay::problems`]
//! so a test can assert there are none. Must not touch: the agent (this only reads updates), the
//! schema (see `schema`). Output is kept as the raw `data` Zed feeds to its VT parser.

use std::collections::HashMap;

use serde_json::Value;

/// What Zed shows for one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    pub title: String,
    /// The card header: `terminal_info.cwd`, when the call has a display terminal.
    pub cwd: Option<String>,
    /// Everything written to the call's display terminal, in order.
    pub output: String,
    /// The tool call status: `pending` (the ACP default), `in_progress`, `completed`, `failed`.
    pub status: String,
    pub kind: Option<String>,
    /// From `_meta.terminal_exit`, once it arrived.
    pub exit_code: Option<u32>,
    pub signal: Option<String>,
    /// Whether a `terminal_exit` reached the display terminal.
    pub exited: bool,
    /// Whether the call's content shows its display terminal: without it there is no card.
    pub has_terminal_block: bool,
    /// The text of the call's `content` text blocks, in order (the description, a console block).
    pub texts: Vec<String>,
}

#[derive(Debug, Clone)]
struct ToolCall {
    title: String,
    status: String,
    kind: Option<String>,
    content: Vec<Value>,
    /// The display terminal created from this call's `terminal_info`.
    terminal_id: Option<String>,
}

#[derive(Debug, Clone, Default)]
struct Terminal {
    cwd: Option<String>,
    output: String,
    exit: Option<(Option<u32>, Option<String>)>,
}

#[derive(Debug, Clone)]
enum TerminalEvent {
    Output(String),
    Exit(Option<u32>, Option<String>),
}

/// Zed's view of one session, built by [`ZedReplay::apply`]-ing its updates in order.
#[derive(Debug, Default)]
pub struct ZedReplay {
    calls: HashMap<String, ToolCall>,
    terminals: HashMap<String, Terminal>,
    /// Output and exits for terminals that do not exist yet, by terminal id.
    buffered: HashMap<String, Vec<TerminalEvent>>,
    problems: Vec<String>,
}

impl ZedReplay {
    /// Applies one update: the `params` of a `session/update` (`{sessionId, update}`) or the
    /// `update` object itself.
    pub fn apply(&mut self, update: &Value) {
        let update = update.get("update").unwrap_or(update);
        match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("tool_call") => self.tool_call(update),
            Some("tool_call_update") => self.tool_call_update(update),
            _ => {}
        }
    }

    /// Applies a whole JSON-RPC message from the agent: `session/update` notifications are
    /// replayed, anything else (responses, other methods) is not Zed's card business and skipped.
    pub fn apply_message(&mut self, message: &Value) {
        if message.get("method").and_then(Value::as_str) == Some("session/update") {
            if let Some(params) = message.get("params") {
                self.apply(params);
            }
        }
    }

    /// The card of `tool_call_id`, if Zed knows that tool call.
    pub fn card(&self, tool_call_id: &str) -> Option<Card> {
        let call = self.calls.get(tool_call_id)?;
        let terminal = call
            .terminal_id
            .as_ref()
            .and_then(|id| self.terminals.get(id));
        let (exit_code, signal) = terminal.and_then(|t| t.exit.clone()).unwrap_or_default();
        Some(Card {
            title: call.title.clone(),
            cwd: terminal.and_then(|t| t.cwd.clone()),
            output: terminal.map(|t| t.output.clone()).unwrap_or_default(),
            status: call.status.clone(),
            kind: call.kind.clone(),
            exit_code,
            signal,
            exited: terminal.is_some_and(|t| t.exit.is_some()),
            has_terminal_block: terminal.is_some()
                && terminal_blocks(&call.content).any(|id| Some(id) == call.terminal_id.as_deref()),
            texts: text_blocks(&call.content),
        })
    }

    /// What Zed would show as a failure or silently ignore; empty for a well-behaved agent.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    fn problem(&mut self, problem: String) {
        self.problems.push(problem);
    }

    fn tool_call(&mut self, update: &Value) {
        let Some(id) = update.get("toolCallId").and_then(Value::as_str) else {
            return self.problem(format!("a tool_call without a toolCallId: {update}"));
        };
        let content = content_of(update).unwrap_or_default();
        let terminal_id = update
            .pointer("/_meta/terminal_info/terminal_id")
            .and_then(Value::as_str)
            .map(str::to_string);
        let shown = terminal_id
            .as_deref()
            .is_some_and(|terminal| terminal_blocks(&content).any(|block| block == terminal));
        if let (Some(terminal), false) = (&terminal_id, shown) {
            self.problem(format!(
                "tool call {id}: terminal_info names terminal {terminal}, but the content has no \
                 terminal block for it, so no card is created"
            ));
        }
        if shown {
            let terminal = terminal_id.clone().unwrap_or_default();
            let cwd = update
                .pointer("/_meta/terminal_info/cwd")
                .and_then(Value::as_str)
                .map(str::to_string);
            if self.terminals.contains_key(&terminal) {
                self.problem(format!(
                    "tool call {id} reuses terminal id {terminal}: Zed replaces that terminal"
                ));
            }
            self.terminals.insert(
                terminal.clone(),
                Terminal {
                    cwd,
                    ..Terminal::default()
                },
            );
            for event in self.buffered.remove(&terminal).unwrap_or_default() {
                self.terminal_event(&terminal, event);
            }
        }
        if let Some(unknown) = self.unknown_terminal(&content) {
            return self.problem(format!(
                "tool call {id} shows terminal {unknown}, which Zed does not know: the tool call \
                 is dropped"
            ));
        }
        let call = ToolCall {
            title: update
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            status: update
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("pending")
                .to_string(),
            kind: update
                .get("kind")
                .and_then(Value::as_str)
                .map(str::to_string),
            content,
            terminal_id: terminal_id.filter(|_| shown),
        };
        self.calls.insert(id.to_string(), call);
        self.terminal_meta(id, update);
    }

    fn tool_call_update(&mut self, update: &Value) {
        let Some(id) = update.get("toolCallId").and_then(Value::as_str) else {
            return self.problem(format!("a tool_call_update without a toolCallId: {update}"));
        };
        if !self.calls.contains_key(id) {
            // Zed shows a failed entry, but still routes the terminal keys (buffered until the
            // terminal appears).
            self.problem(format!("Tool call not found: an update for unknown {id}"));
            return self.terminal_meta(id, update);
        }
        if update.pointer("/_meta/terminal_info").is_some() {
            self.problem(format!(
                "tool call {id}: Zed ignores terminal_info on a tool_call_update (only tool_call)"
            ));
        }
        let content = content_of(update);
        if let Some(unknown) = content.as_deref().and_then(|c| self.unknown_terminal(c)) {
            return self.problem(format!(
                "tool call {id}: the update shows terminal {unknown}, which Zed does not know: \
                 the update fails"
            ));
        }
        let call = self.calls.get_mut(id).expect("checked above");
        if let Some(title) = update.get("title").and_then(Value::as_str) {
            call.title = title.to_string();
        }
        if let Some(status) = update.get("status").and_then(Value::as_str) {
            call.status = status.to_string();
        }
        if let Some(kind) = update.get("kind").and_then(Value::as_str) {
            call.kind = Some(kind.to_string());
        }
        if let Some(content) = content {
            call.content = content;
        }
        self.terminal_meta(id, update);
    }

    /// `_meta.terminal_output`, then `_meta.terminal_exit`, as Zed orders them.
    fn terminal_meta(&mut self, id: &str, update: &Value) {
        if update.pointer("/_meta/terminal_output_delta").is_some() {
            self.problem(format!(
                "tool call {id}: Zed ignores _meta.terminal_output_delta"
            ));
        }
        if let Some(output) = update.pointer("/_meta/terminal_output") {
            let terminal = output.get("terminal_id").and_then(Value::as_str);
            let data = output.get("data").and_then(Value::as_str);
            match (terminal, data) {
                (Some(terminal), Some(data)) => {
                    if ends_inside_escape(data) {
                        self.problem(format!(
                            "tool call {id}: terminal_output data ends inside an escape sequence \
                             (some Zed releases parse each data string on its own): {data:?}"
                        ));
                    }
                    self.route(terminal, TerminalEvent::Output(data.to_string()));
                }
                _ => self.problem(format!(
                    "tool call {id}: terminal_output needs a string terminal_id and data: {output}"
                )),
            }
        }
        if let Some(exit) = update.pointer("/_meta/terminal_exit") {
            let Some(terminal) = exit.get("terminal_id").and_then(Value::as_str) else {
                return self.problem(format!("tool call {id}: terminal_exit has no terminal_id"));
            };
            let exit_code = match exit.get("exit_code") {
                None | Some(Value::Null) => None,
                Some(code) => match code.as_u64().and_then(|code| u32::try_from(code).ok()) {
                    Some(code) => Some(code),
                    None => {
                        return self.problem(format!(
                            "tool call {id}: terminal_exit.exit_code {code} is not an unsigned \
                             32-bit number, which Zed cannot read"
                        ))
                    }
                },
            };
            let signal = exit
                .get("signal")
                .and_then(Value::as_str)
                .map(str::to_string);
            self.route(terminal, TerminalEvent::Exit(exit_code, signal));
        }
    }

    fn route(&mut self, terminal: &str, event: TerminalEvent) {
        if self.terminals.contains_key(terminal) {
            self.terminal_event(terminal, event);
        } else {
            self.buffered
                .entry(terminal.to_string())
                .or_default()
                .push(event);
        }
    }

    fn terminal_event(&mut self, terminal: &str, event: TerminalEvent) {
        let terminal = self
            .terminals
            .get_mut(terminal)
            .expect("routed to a known terminal");
        match event {
            TerminalEvent::Output(data) => terminal.output.push_str(&data),
            TerminalEvent::Exit(exit_code, signal) => terminal.exit = Some((exit_code, signal)),
        }
    }

    fn unknown_terminal(&self, content: &[Value]) -> Option<String> {
        terminal_blocks(content)
            .find(|id| !self.terminals.contains_key(*id))
            .map(str::to_string)
    }
}

/// The `content` array of an update; `None` when absent or null (the content is left alone).
fn content_of(update: &Value) -> Option<Vec<Value>> {
    update.get("content").and_then(Value::as_array).cloned()
}

fn terminal_blocks(content: &[Value]) -> impl Iterator<Item = &str> {
    content.iter().filter_map(|block| {
        (block.get("type")? == "terminal").then_some(())?;
        block.get("terminalId")?.as_str()
    })
}

fn text_blocks(content: &[Value]) -> Vec<String> {
    content
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("content"))
        .filter_map(|block| block.pointer("/content/text").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// Whether `data` ends in the middle of an escape sequence (a terminal parsing this string alone
/// would misread the rest of the sequence in the next one).
pub fn ends_inside_escape(data: &str) -> bool {
    let Some(start) = data.rfind('\u{1b}') else {
        return false;
    };
    let mut rest = data[start + 1..].chars();
    match rest.next() {
        None => true,
        Some('[') => !rest.any(|c| ('\u{40}'..='\u{7e}').contains(&c)),
        Some(']') => !rest.any(|c| c == '\u{7}'),
        // DCS, SOS, PM, APC: only ST (`ESC \`) ends them, and the last ESC starts the string.
        Some('P' | 'X' | '^' | '_') => true,
        Some(c) if ('\u{20}'..='\u{2f}').contains(&c) => {
            !rest.any(|c| !('\u{20}'..='\u{2f}').contains(&c))
        }
        Some(_) => false,
    }
}
