//! The turn: the one consumer of a driver's events.
//!
//! Owns [`Turn`], the [`TurnHost`] a [`Driver`] is handed for one prompt, and [`run_turn`].
//! For each event the turn records what the session keeps (the prompt once, the agent's text,
//! each call with its end), mints the call's id and hands the event to the client's side through
//! a [`TurnPort`] (the ACP bridge implements it: messages, cards, console blocks). It decides how
//! the turn ends on the wire: cancelled when cancelled, whatever the driver says. Must not
//! touch: driver rules (what a prompt means is the driver's), protocol types (the port's), how a
//! command runs (the engine's).

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use crate::driver::commands::SlashCommand;
use crate::driver::{Compaction, Driver, Prompt, StopReason, TurnError, TurnHost, Usage};
use crate::exec::Session;
use crate::jobs::JobRegistry;
use crate::mcp::{McpResult, McpTool};
use crate::permit::{self, Answer, Ask, SessionPermits};
use crate::store::{SessionLog, SessionRecord};
use crate::tool::{BashCall, BashResult};

/// Where a turn's events go on their way to the client. The turn has recorded each event before
/// it reaches the port.
pub trait TurnPort: Send + Sync {
    /// The agent's text (a piece of its message).
    fn message(&self, text: &str);

    /// The agent's reasoning (a piece of a thought).
    fn thought(&self, text: &str);

    /// Token use.
    fn usage(&self, usage: &Usage);

    /// A context compaction's state. The default shows its notice as the agent's text.
    fn compaction(&self, compaction: &Compaction) {
        if !compaction.notice.is_empty() {
            self.message(&compaction.notice);
        }
    }

    /// The session got its title (from its first call).
    fn title(&self, title: &str);

    /// Runs `call` as the tool call `call_id` on the wire (its `tool_call`, live output, final
    /// update) until it ends; `cancel` kills it.
    fn run_call<'a>(
        &'a self,
        call_id: &'a str,
        call: &'a BashCall,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, BashResult>;

    /// Runs a slash command and shows its answer; returns the answer's text.
    fn run_command(&self, command: SlashCommand) -> BoxFuture<'_, String>;

    /// Asks the user about `ask`, what the sandbox refused the call `call_id` (which has
    /// ended), and returns the answer. The default cannot ask ([`Answer::NotAsked`]).
    fn ask_permission<'a>(
        &'a self,
        call_id: &'a str,
        call: &'a BashCall,
        ask: &'a Ask,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Answer> {
        let _ = (call_id, call, ask, cancel);
        Box::pin(async { Answer::NotAsked })
    }

    /// The tools of the session's MCP servers (empty by default); tells the user, once, of a
    /// server that failed.
    fn mcp_tools(&self) -> BoxFuture<'_, Vec<McpTool>> {
        Box::pin(async { Vec::new() })
    }

    /// Calls `tool` with `arguments` as the tool call `call_id` on the wire (its `tool_call`,
    /// its final update with the result) until it ends; `cancel` stops waiting.
    fn run_mcp<'a>(
        &'a self,
        call_id: &'a str,
        tool: &'a McpTool,
        arguments: serde_json::Value,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, McpResult> {
        let _ = (call_id, arguments, cancel);
        Box::pin(async move {
            McpResult::failed(format!(
                "There is no MCP server here to call {}.",
                tool.qualified
            ))
        })
    }
}

/// One turn of a session: the [`TurnHost`] its driver is handed.
#[non_exhaustive]
pub struct Turn<'a> {
    port: &'a dyn TurnPort,
    session: &'a Session,
    session_id: &'a str,
    jobs: &'a JobRegistry,
    log: &'a SessionLog,
    cancel: CancellationToken,
    new_call_id: &'a (dyn Fn() -> String + Send + Sync),
    prompt: String,
    /// The prompt's images as the record keeps them (given to the record with the prompt).
    images: Vec<crate::store::record::ImageRecord>,
    /// The turn's number in the record, once it has recorded something (a turn that says and
    /// runs nothing, a slash command, leaves no turn).
    recorded: Option<u64>,
    /// The agent's text not recorded yet: written before the next call and at the end, not on
    /// every piece of a model's stream.
    unrecorded_text: String,
    /// The model the session chose ([`TurnHost::model`]).
    model: Option<String>,
    /// The reasoning level the session chose ([`TurnHost::thought_level`]).
    thought_level: Option<String>,
    /// What the session's user allowed, and whether to ask (`None`: never ask).
    permits: Option<SessionPermits>,
}

impl<'a> Turn<'a> {
    /// A turn of `session` (`session_id`) for the prompt whose text is `prompt`: events go to
    /// `port` and are recorded in `log`; `new_call_id` mints each call's id; `cancel` is the
    /// turn's token.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        port: &'a dyn TurnPort,
        session: &'a Session,
        session_id: &'a str,
        jobs: &'a JobRegistry,
        log: &'a SessionLog,
        cancel: CancellationToken,
        new_call_id: &'a (dyn Fn() -> String + Send + Sync),
        prompt: String,
    ) -> Self {
        Turn {
            port,
            session,
            session_id,
            jobs,
            log,
            cancel,
            new_call_id,
            prompt,
            images: Vec::new(),
            recorded: None,
            unrecorded_text: String::new(),
            model: None,
            thought_level: None,
            permits: None,
        }
    }

    /// Asks the user (through the port) when the sandbox refuses one of the turn's calls, and
    /// applies what the session's user allowed ([`crate::permit`]).
    pub fn permits(mut self, permits: Option<SessionPermits>) -> Self {
        self.permits = permits;
        self
    }

    /// Sets the reasoning level the session chose for this turn ([`TurnHost::thought_level`]).
    pub fn thought_level(mut self, level: Option<String>) -> Self {
        self.thought_level = level;
        self
    }

    /// Sets the model the session chose for this turn ([`TurnHost::model`]).
    pub fn model(mut self, model: Option<String>) -> Self {
        self.model = model;
        self
    }

    /// The turn's number in the record, recording the turn (its prompt) first if need be.
    fn recorded(&mut self) -> u64 {
        match self.recorded {
            Some(number) => number,
            None => {
                let images = std::mem::take(&mut self.images);
                let number = self.log.turn_started_with_images(&self.prompt, images);
                *self.recorded.insert(number)
            }
        }
    }

    /// Records the agent's text that came since the last call.
    fn record_text(&mut self) {
        if !self.unrecorded_text.is_empty() {
            let turn = self.recorded();
            self.log
                .said(turn, &std::mem::take(&mut self.unrecorded_text));
        }
    }
}

impl TurnHost for Turn<'_> {
    fn say(&mut self, text: &str) {
        // Bounded in the record (`KEEP_TURN_TEXT`); keep no more than that in memory either.
        if self.unrecorded_text.len() < crate::store::record::KEEP_TURN_TEXT {
            self.unrecorded_text.push_str(text);
        }
        self.port.message(text);
    }

    fn notice(&mut self, text: &str) {
        // What the model said before it goes first, as its own piece.
        self.record_text();
        let turn = self.recorded();
        self.log.notice(turn, text);
        self.port.message(text);
    }

    fn think(&mut self, text: &str) {
        self.port.thought(text);
    }

    fn usage(&mut self, usage: Usage) {
        self.port.usage(&usage);
    }

    fn compaction(&mut self, compaction: Compaction) {
        // The notice is recorded as the agent's text (as `say` does), whatever the client shows.
        if self.unrecorded_text.len() < crate::store::record::KEEP_TURN_TEXT {
            self.unrecorded_text.push_str(&compaction.notice);
        }
        self.port.compaction(&compaction);
    }

    fn run_bash<'b>(&'b mut self, call: BashCall) -> BoxFuture<'b, BashResult> {
        async move {
            let mut call = call;
            let session_mode = || call_mode(&call, self.session);
            if let Some(permits) = &self.permits {
                // A granted prefix: the command runs in the mode the user allowed it, with the
                // folders the user allowed it to write (never in full mode, where the always
                // file could be changed).
                if let Some(widened) = permits.widened(call.command(), session_mode()) {
                    call.request.sandbox_mode = Some(widened.mode);
                    if cfg!(target_os = "linux") {
                        call.request.also_writable.extend(widened.also_writable);
                    } else if !widened.also_writable.is_empty() {
                        // macOS's profile has no extra writable folder yet (as "once").
                        call.request.sandbox_mode = Some(crate::sandbox::Mode::Full);
                    }
                }
            }
            let (call_id, result) = self.run_one(&call).await;
            match &self.permits {
                Some(permits) if permits.settings.ask => {
                    let permits = permits.clone();
                    self.ask_after(&permits, call, &call_id, result).await
                }
                _ => result,
            }
        }
        .boxed()
    }

    fn run_command<'b>(&'b mut self, command: SlashCommand) -> BoxFuture<'b, String> {
        self.port.run_command(command)
    }

    fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    fn session(&self) -> &Session {
        self.session
    }

    fn session_id(&self) -> &str {
        self.session_id
    }

    fn jobs(&self) -> &JobRegistry {
        self.jobs
    }

    fn record(&self) -> SessionRecord {
        self.log.record()
    }

    fn model(&self) -> Option<String> {
        self.model.clone()
    }

    fn thought_level(&self) -> Option<String> {
        self.thought_level.clone()
    }

    fn mcp_tools<'b>(&'b mut self) -> BoxFuture<'b, Vec<McpTool>> {
        self.port.mcp_tools()
    }

    fn run_mcp<'b>(
        &'b mut self,
        tool: McpTool,
        arguments: serde_json::Value,
    ) -> BoxFuture<'b, McpResult> {
        async move {
            // The agent's text so far is recorded before the call, as for a bash call. The
            // call itself is not in the record (a resumed conversation holds bash calls only).
            self.record_text();
            let call_id = (self.new_call_id)();
            self.port
                .run_mcp(&call_id, &tool, arguments, &self.cancel)
                .await
        }
        .boxed()
    }
}

impl Turn<'_> {
    /// Runs `call` as a call of its own (recorded, on the wire): its id and result.
    async fn run_one(&mut self, call: &BashCall) -> (String, BashResult) {
        self.record_text();
        let call_id = (self.new_call_id)();
        let cwd = call
            .request
            .cwd
            .clone()
            .unwrap_or_else(|| self.session.cwd());
        // A turn's first record is written with its first call (one write, not two), unless
        // it has images to keep (with the turn).
        if self.recorded.is_none() && !self.images.is_empty() {
            self.recorded();
        }
        let which = match self.recorded {
            Some(number) => Err(number),
            None => Ok(self.prompt.as_str()),
        };
        let (turn, title) = self.log.turn_and_call_started(
            which,
            &call_id,
            call.command(),
            call.description.as_deref(),
            &cwd,
        );
        self.recorded = Some(turn);
        let result = self.port.run_call(&call_id, call, &self.cancel).await;
        self.log
            .call_finished(&call_id, &result.outcome, result.changes.as_ref());
        if let Some(title) = title {
            self.port.title(&title);
        }
        (call_id, result)
    }

    /// After `call` (`call_id`) ended with `result`: when the sandbox refused it something the
    /// user may allow, asks; runs it again when allowed (a call of its own), else tells the
    /// model (and the user) what the answer was or how to allow it.
    async fn ask_after(
        &mut self,
        permits: &SessionPermits,
        call: BashCall,
        call_id: &str,
        mut result: BashResult,
    ) -> BashResult {
        let mode = call_mode(&call, self.session);
        let Some(refusal) = permit::refusal_of(&result.outcome, self.session, mode) else {
            return result;
        };
        if self.cancel.is_cancelled() {
            return result;
        }
        // A write to where "allow always" is kept is never asked about: no answer may let a
        // command grant itself anything.
        if let (permit::Refusal::Write { path, .. }, Some(file)) =
            (&refusal, &permits.settings.always)
        {
            if path.starts_with(file.folder()) {
                return result;
            }
        }
        let prefix = match refusal {
            permit::Refusal::Host { .. } => None,
            _ => permit::prefix_of(call.command()),
        };
        let ask = Ask {
            refusal,
            command: call.command().to_string(),
            cwd: result.outcome.cwd.clone(),
            prefix,
            keep: permits.settings.always.is_some(),
        };
        // Asking turned off for the session: the failure, with how to allow it.
        let answer = if permits.asks() {
            self.port
                .ask_permission(call_id, &call, &ask, &self.cancel)
                .await
        } else {
            Answer::NotAsked
        };
        tracing::info!(?answer, refusal = ?ask.refusal, "permission asked");
        match answer {
            Answer::Once | Answer::Session | Answer::Always => {}
            other => {
                if let Some(note) = ask.note(other) {
                    self.notice(&format!("acp-bash: {note}.\n"));
                    result.add_note(&note);
                }
                return result;
            }
        }
        let mut kept_note = None;
        if answer != Answer::Once {
            if let Some(grant) = SessionPermits::grant_for(&ask) {
                permits.apply(&grant);
                if answer == Answer::Always {
                    if let Some(file) = &permits.settings.always {
                        kept_note = Some(match file.add(&grant) {
                            Ok(()) => format!(
                                "kept `{}` in {} (delete the line to take it back)",
                                grant.line(),
                                file.path.display()
                            ),
                            Err(error) => format!(
                                "could not keep `{}` in {}: {error}; it holds for this session",
                                grant.line(),
                                file.path.display()
                            ),
                        });
                    }
                }
            }
        }
        if let Some(kept) = &kept_note {
            // The user sees where it was kept, and how to take it back.
            self.notice(&format!("acp-bash: {kept}.\n"));
        }
        let mut again = call;
        // Once, a host: the re-run alone may reach it, through a proxy listener of its own
        // (Linux); the session's other commands, its background jobs too, may not.
        let once_host = match (&ask.refusal, answer) {
            (permit::Refusal::Host { host }, Answer::Once) if cfg!(target_os = "linux") => {
                if let Ok(pattern) = crate::netproxy::HostPattern::parse(host) {
                    again.request.also_hosts.push(pattern);
                }
                None
            }
            (permit::Refusal::Host { host }, Answer::Once) => permits.allow_once(host),
            _ => None,
        };
        match (answer, ask.refusal.once_writable()) {
            // Once, a write: the same mode, with the refused path's folder writable for this
            // run only (masks still over it), not full mode, where nothing is masked.
            (Answer::Once, Some(folder)) if cfg!(target_os = "linux") => {
                again.request.sandbox_mode = Some(mode);
                again.request.also_writable.push(folder);
            }
            _ => {
                if let Some(mode) = ask.refusal.mode_that_allows() {
                    again.request.sandbox_mode = Some(mode);
                }
            }
        }
        let (_, mut second) = self.run_one(&again).await;
        if let Some(pattern) = once_host {
            permits.end_once(&pattern);
        }
        let scope = match answer {
            Answer::Once => "this once",
            Answer::Session => "for this session",
            _ => "always",
        };
        let mut note = format!(
            "the user allowed it {scope} ({}); this is the result of running it again",
            ask.refusal.what()
        );
        if let Some(kept) = kept_note {
            note.push_str("; ");
            note.push_str(&kept);
        }
        second.add_note(&note);
        second
    }
}

/// The mode `call` runs in on `session`.
fn call_mode(call: &BashCall, session: &Session) -> crate::sandbox::Mode {
    call.request.sandbox_mode.unwrap_or_else(|| session.mode())
}

/// Runs `prompt`'s turn with `driver` on `turn`. A cancelled turn ends
/// [`StopReason::Cancelled`], whatever the driver returned.
pub async fn run_turn(
    driver: &dyn Driver,
    prompt: &Prompt,
    mut turn: Turn<'_>,
) -> Result<StopReason, TurnError> {
    if turn.cancel.is_cancelled() {
        return Ok(StopReason::Cancelled);
    }
    turn.images =
        crate::store::record::ImageRecord::of_prompt(prompt.blocks.iter().filter_map(|block| {
            match block {
                crate::driver::PromptBlock::Image { mime_type, data } => {
                    Some((mime_type.as_str(), data.as_str()))
                }
                _ => None,
            }
        }));
    let ended = driver.drive(prompt, &mut turn).await;
    turn.record_text();
    if turn.cancel.is_cancelled() {
        return Ok(StopReason::Cancelled);
    }
    ended
}
