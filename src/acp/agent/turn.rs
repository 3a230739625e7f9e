//! `session/prompt`: a prompt becomes a turn of the agent's driver, on the wire.
//!
//! Owns: checking the prompt (its session, its size), reading its ACP content into a
//! provider-neutral [`Prompt`], registering the turn's cancellation, running the turn
//! ([`crate::turn::run_turn`]) as a connection task, the one [`TurnPort`] that puts the turn's
//! events on the wire of either face ([`Face`]: v1 messages and each call's card or console
//! block, or v2 messages with ids and each call an agent-owned terminal; thoughts, usage, the
//! title, slash commands), and answering with the turn's stop reason (the v2 face's handlers,
//! in `v2face`, run their turns through the same port). Must not touch: what a prompt
//! means (the driver's), what is recorded (the turn's), how a call looks (the bridge's).
//!
//! Concurrency: the handler only validates, registers and `cx.spawn`s; the turn waits for the
//! session's earlier turn there. A call runs on a tracked tokio task (shutdown waits for it).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Cost, EmbeddedResourceResource, PromptRequest, PromptResponse,
    SessionId, SessionInfoUpdate, SessionUpdate, StopReason as AcpStopReason, ToolCallId,
    ToolCallStatus, UsageUpdate,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::v2::schema as v2;
use agent_client_protocol::{Client, Error};
use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::errors::{auth_required, invalid_params};
use super::session::SessionState;
use super::Connection;
use crate::acp::bridge::{self, ClientFeatures};
use crate::acp::commands::{CommandTurn, JobCard};
use crate::acp::tool_call::{ConnectionSink, ToolCallRunner, UpdateSink};
use crate::acp::v2::V2Sink;
use crate::acp::ClientBehind;
use crate::driver::commands::SlashCommand;
use crate::driver::{Prompt, PromptBlock, StopReason, TurnError, Usage};
use crate::mcp::{McpResult, McpTool};
use crate::permit::{Answer, Ask};
use crate::present::mcp::{mcp_result_text, present_mcp_call};
use crate::present::{console_block, present_call, ResultView};
use crate::tool::{BashCall, BashResult};
use crate::turn::{run_turn, Turn, TurnPort};

impl Connection {
    /// Validates the prompt, then runs the turn as a connection task and returns at once.
    pub(super) fn prompt(
        self: Arc<Self>,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let state = match self.session_state(&request.session_id) {
            Ok(state) => state,
            Err(error) => return responder.respond_with_error(error),
        };
        let prompt = prompt_of(&request.prompt);
        let bytes = prompt.text().len();
        if bytes > self.max_prompt_bytes {
            return responder.respond_with_error(invalid_params(
                format!(
                    "the prompt is {bytes} bytes; acp-bash runs scripts of at most {} bytes \
                     (start it with a larger --max-prompt-bytes to allow more)",
                    self.max_prompt_bytes
                ),
                json!({ "promptBytes": bytes, "maxPromptBytes": self.max_prompt_bytes }),
            ));
        }
        let token = CancellationToken::new();
        let turn = state.next_turn.fetch_add(1, Ordering::Relaxed);
        state.running.lock().unwrap().insert(turn, token.clone());
        let task_cx = cx.clone();
        // `$/cancel_request` for this prompt (JSON-RPC's own cancel) stops it like session/cancel.
        let rpc_cancel = responder.cancellation();
        cx.spawn(async move {
            let session_id = request.session_id;
            let running = self.run_turn(&task_cx, &session_id, &state, &prompt, &token);
            tokio::pin!(running);
            let (ended, card) = tokio::select! {
                ended = &mut running => ended,
                () = rpc_cancel.cancelled() => {
                    tracing::info!(session = %session_id.0, "$/cancel_request for a prompt");
                    token.cancel();
                    running.await
                }
            };
            state.running.lock().unwrap().remove(&turn);
            // Never return Err from a connection task: it would tear the connection down.
            if let Err(error) = responder.respond_with_result(ended.map(PromptResponse::new)) {
                tracing::debug!(%error, "could not answer session/prompt");
            }
            // A job started by `/bg` streams to its card after the turn has been answered.
            if let Some(card) = card {
                card.spawn(&self.runs);
            }
            Ok(())
        })
    }

    /// One turn of `state` for `prompt`, after the session's earlier turns.
    async fn run_turn(
        &self,
        cx: &ConnectionTo<Client>,
        session_id: &SessionId,
        state: &Arc<SessionState>,
        prompt: &Prompt,
        token: &CancellationToken,
    ) -> (Result<AcpStopReason, Error>, Option<JobCard>) {
        let _turn = state.turn.lock().await;
        let face = Face::V1 {
            cx,
            session_id,
            features: *self.features.lock().unwrap(),
        };
        let (ended, card) = self.turn_on(face, state, prompt, token).await;
        (ended.map(acp_stop_reason), card)
    }

    /// One turn of `state` for `prompt` with its events on `face` (the caller holds the
    /// session's turn lock): the driver's stop reason, or the error the turn ended with (a
    /// call's task that failed, a driver that wants authentication, any other driver error),
    /// and a `/bg` job's card for the caller to spawn once the turn is over.
    pub(super) async fn turn_on(
        &self,
        face: Face<'_>,
        state: &Arc<SessionState>,
        prompt: &Prompt,
        token: &CancellationToken,
    ) -> (Result<StopReason, Error>, Option<JobCard>) {
        let session_id = face.session_id().to_string();
        let port = AcpTurn {
            connection: self,
            state,
            face,
            card: Mutex::new(None),
            failure: Mutex::new(None),
        };
        let new_call_id = || state.new_call_id().0.to_string();
        let turn = Turn::new(
            &port,
            &state.session,
            &session_id,
            &state.jobs.registry,
            &state.log,
            token.clone(),
            &new_call_id,
            prompt.text(),
        )
        .model(state.model.lock().unwrap().clone())
        .thought_level(state.thought_level.lock().unwrap().clone())
        .permits(Some(state.permits.clone()));
        let ended = run_turn(&*self.driver, prompt, turn).await;
        let card = port.card.lock().unwrap().take();
        if let Some(failure) = port.failure.lock().unwrap().take() {
            return (Err(Error::internal_error().data(failure)), card);
        }
        let ended = match ended {
            Ok(stop) => Ok(stop),
            Err(TurnError::AuthRequired(message)) => Err(auth_required(&message)),
            Err(error) => Err(Error::internal_error().data(error.to_string())),
        };
        (ended, card)
    }
}

fn acp_stop_reason(stop: StopReason) -> AcpStopReason {
    match stop {
        StopReason::EndTurn => AcpStopReason::EndTurn,
        StopReason::MaxTokens => AcpStopReason::MaxTokens,
        StopReason::MaxTurnRequests => AcpStopReason::MaxTurnRequests,
        StopReason::Refusal => AcpStopReason::Refusal,
        StopReason::Cancelled => AcpStopReason::Cancelled,
    }
}

/// The face a turn's events go out on: the one place that chooses between a v1 card or console
/// block ([`crate::acp::call_wire::CallWire::open`]) and a v2 agent-owned terminal
/// ([`crate::acp::call_wire::CallWire::open_v2`], through [`ToolCallRunner::on_v2`]), which
/// sink carries the updates, and how a message, a thought, usage and the title look.
pub(super) enum Face<'a> {
    /// ACP v1: cards or console blocks as the client's `initialize` asked.
    V1 {
        cx: &'a ConnectionTo<Client>,
        session_id: &'a SessionId,
        features: ClientFeatures,
    },
    /// ACP v2: each call a terminal; messages carry ids `KIND-SESSION-TURN-N`.
    V2 {
        cx: &'a agent_client_protocol::v2::ConnectionTo<Client>,
        session_id: &'a v2::SessionId,
        /// The session's number (the message ids' `SESSION`).
        session: u64,
        /// The turn's number (the message ids' `TURN`).
        turn: u64,
        messages: Mutex<u64>,
    },
}

impl Face<'_> {
    fn session_id(&self) -> &str {
        match self {
            Face::V1 { session_id, .. } => &session_id.0,
            Face::V2 { session_id, .. } => &session_id.0,
        }
    }

    fn v2(&self) -> bool {
        matches!(self, Face::V2 { .. })
    }

    /// How a call is run and rendered on this face.
    fn runner(&self) -> ToolCallRunner {
        match self {
            Face::V1 { features, .. } => ToolCallRunner::new(*features),
            Face::V2 { .. } => ToolCallRunner::default().on_v2(),
        }
    }

    /// The session's updates on this face; with `behind`, no live output while it is up.
    fn sink(&self, behind: Option<ClientBehind>) -> Box<dyn UpdateSink> {
        match (self, behind) {
            (Face::V1 { cx, session_id, .. }, behind) => {
                let sink = ConnectionSink::new((*cx).clone(), (*session_id).clone());
                Box::new(match behind {
                    Some(behind) => sink.skip_live_while(behind),
                    None => sink,
                })
            }
            (Face::V2 { cx, session_id, .. }, behind) => {
                let sink = V2Sink::new((*cx).clone(), (*session_id).clone());
                Box::new(match behind {
                    Some(behind) => sink.skip_live_while(behind),
                    None => sink,
                })
            }
        }
    }

    /// The next message id of `kind` (v2 only).
    fn message_id(&self, kind: &str) -> v2::MessageId {
        let Face::V2 {
            session,
            turn,
            messages,
            ..
        } = self
        else {
            unreachable!("message ids are v2's")
        };
        let mut n = messages.lock().unwrap();
        *n += 1;
        v2::MessageId::new(format!("{kind}-{session}-{turn}-{n}"))
    }

    /// Sends what `v1` makes (given the client's features) on the v1 face, or what `v2` makes
    /// (given the face, for message ids) on the v2 face.
    fn send(
        &self,
        v1: impl FnOnce(ClientFeatures) -> SessionUpdate,
        v2: impl FnOnce(&Self) -> Option<v2::SessionUpdate>,
    ) {
        let mut sink = self.sink(None);
        match self {
            Face::V1 { features, .. } => sink.send(v1(*features)),
            Face::V2 { .. } => {
                if let Some(update) = v2(self) {
                    sink.send_v2(update);
                }
            }
        }
    }
}

/// A turn's events on the wire, for one session of one connection, on either face.
struct AcpTurn<'a> {
    connection: &'a Connection,
    state: &'a Arc<SessionState>,
    face: Face<'a>,
    /// A `/bg` job's card, spawned once the turn is over.
    card: Mutex<Option<JobCard>>,
    /// A call's task failed (it panicked): the turn ends with this error.
    failure: Mutex<Option<String>>,
}

impl TurnPort for AcpTurn<'_> {
    fn message(&self, text: &str) {
        self.face.send(
            |_| bridge::agent_message(text),
            |face| {
                Some(v2::SessionUpdate::AgentMessageChunk(v2::ContentChunk::new(
                    text.to_string().into(),
                    face.message_id("agent"),
                )))
            },
        );
    }

    fn thought(&self, text: &str) {
        self.face.send(
            |_| SessionUpdate::AgentThoughtChunk(ContentChunk::new(text.to_string().into())),
            |face| {
                Some(v2::SessionUpdate::AgentThoughtChunk(v2::ContentChunk::new(
                    text.to_string().into(),
                    face.message_id("thought"),
                )))
            },
        );
    }

    fn usage(&self, usage: &Usage) {
        let update = || {
            let mut update = UsageUpdate::new(usage.used, usage.size);
            if let Some(cost) = &usage.cost {
                update = update.cost(Cost::new(cost.amount, cost.currency.clone()));
            }
            if let Some((read, written)) = usage.cached {
                // `usage_update` has no field for the prompt cache: the names of ACP's
                // (unstable) end-of-turn `Usage`, under `_meta`.
                let mut meta = serde_json::Map::new();
                meta.insert("cachedReadTokens".into(), read.into());
                meta.insert("cachedWriteTokens".into(), written.into());
                update = update.meta(meta);
            }
            SessionUpdate::UsageUpdate(update)
        };
        self.face.send(|_| update(), |_| to_v2(update()));
    }

    fn compaction(&self, compaction: &crate::driver::Compaction) {
        use crate::driver::CompactionStatus;
        use agent_client_protocol::v1::schema::{
            CompactionStatus as Status, CompactionUpdate, ContentBlock as Block,
        };
        let status = match compaction.status {
            CompactionStatus::InProgress => Status::InProgress,
            CompactionStatus::Completed => Status::Completed,
            _ => Status::Failed,
        };
        let update = |features: ClientFeatures| {
            if !features.compaction {
                return bridge::agent_message(&compaction.notice);
            }
            let mut update = CompactionUpdate::new(compaction.id.clone(), status);
            if let Some(summary) = &compaction.summary {
                update = update.summary(vec![Block::from(summary.clone())]);
            }
            if compaction.status == CompactionStatus::Failed {
                update = update.error(compaction.notice.trim().to_string());
            }
            SessionUpdate::CompactionUpdate(update)
        };
        if compaction.notice.is_empty() && compaction.summary.is_none() {
            return;
        }
        self.face.send(update, |face| {
            Some(v2::SessionUpdate::AgentMessageChunk(v2::ContentChunk::new(
                compaction.notice.clone().into(),
                face.message_id("agent"),
            )))
        });
    }

    fn title(&self, title: &str) {
        // The title only: a clock reading would make every transcript differ.
        self.face.send(
            |_| SessionUpdate::SessionInfoUpdate(SessionInfoUpdate::new().title(title.to_string())),
            |_| {
                Some(v2::SessionUpdate::SessionInfoUpdate(
                    v2::SessionInfoUpdate::new().title(title.to_string()),
                ))
            },
        );
    }

    fn run_call<'b>(
        &'b self,
        call_id: &'b str,
        call: &'b BashCall,
        cancel: &'b CancellationToken,
    ) -> BoxFuture<'b, BashResult> {
        async move {
            let connection = self.connection;
            let call_id = ToolCallId::new(call_id.to_string());
            *self.state.current_call.lock().unwrap() = Some(call_id.0.to_string());
            // Its own token: on v2, `terminal/cancel` stops this call only (session/cancel
            // stops the turn and so every call).
            let token = cancel.child_token();
            let v2 = self.face.v2();
            if v2 {
                let calls = &self.state.v2_calls;
                calls
                    .lock()
                    .unwrap()
                    .insert(call_id.0.to_string(), token.clone());
            }
            let runner = self.face.runner().limits(connection.limits);
            // The call runs on a tracked tokio task, so that shutdown can wait for the kill.
            let run = {
                let session = self.state.session.clone();
                // While the client is behind on reading, the call makes no live output;
                // everything else (the final update above all) always goes.
                let mut sink = self.face.sink(Some(connection.client_behind.clone()));
                let call_id = call_id.clone();
                let call = call.clone();
                let state = self.state.clone();
                connection.runs.spawn(async move {
                    let before_end = || {
                        // Before its exit goes out: an exited terminal is not cancellable.
                        if v2 {
                            state.v2_calls.lock().unwrap().remove(&*call_id.0);
                        }
                    };
                    runner
                        .run_until_ended(&session, &call_id, &call, &mut *sink, &token, before_end)
                        .await
                })
            };
            let result = run.await;
            if v2 {
                self.state.v2_calls.lock().unwrap().remove(&*call_id.0);
            }
            *self.state.current_call.lock().unwrap() = None;
            match result {
                Ok(result) => result,
                Err(error) => {
                    tracing::error!(%error, "the command's task failed");
                    let message = format!("acp-bash could not run the command: {error}");
                    self.face.send(
                        |features| {
                            let view = present_call(&BashCall::new(""), &self.state.session.cwd());
                            let console = console_block(&message);
                            let text = ResultView::Text { console };
                            SessionUpdate::ToolCallUpdate(bridge::final_update(
                                &call_id, &view, &text, features,
                            ))
                        },
                        |_| {
                            Some(crate::acp::v2::call_ended(
                                &call_id,
                                ToolCallStatus::Failed,
                                None,
                                None,
                            ))
                        },
                    );
                    *self.failure.lock().unwrap() = Some(error.to_string());
                    BashResult::failed(message, self.state.session.cwd())
                }
            }
        }
        .boxed()
    }

    fn ask_permission<'b>(
        &'b self,
        call_id: &'b str,
        call: &'b BashCall,
        ask: &'b Ask,
        cancel: &'b CancellationToken,
    ) -> BoxFuture<'b, Answer> {
        async move {
            let choices = ask.choices();
            let meta = permission_meta(ask);
            // Awaited here, in the turn's connection task, never in a handler: the connection's
            // loop goes on dispatching (the answer, a session/cancel) meanwhile (SDK guide §4).
            let selected: Result<Option<String>, Error> = match &self.face {
                Face::V1 {
                    cx,
                    session_id,
                    features,
                } => {
                    use agent_client_protocol::v1::schema::{
                        PermissionOption, PermissionOptionKind as Kind, RequestPermissionOutcome,
                        RequestPermissionRequest, ToolCallUpdate, ToolCallUpdateFields,
                    };
                    let options = choices
                        .iter()
                        .map(|c| {
                            let kind = match c.answer {
                                Answer::Once => Kind::AllowOnce,
                                Answer::Session | Answer::Always => Kind::AllowAlways,
                                _ => Kind::RejectOnce,
                            };
                            PermissionOption::new(c.id, c.name.clone(), kind)
                        })
                        .collect();
                    let id = ToolCallId::new(call_id.to_string());
                    let asking = ToolCallUpdate::new(
                        id.clone(),
                        ToolCallUpdateFields::new().title(ask.title()),
                    );
                    let request =
                        RequestPermissionRequest::new((*session_id).clone(), asking, options)
                            .meta(meta.as_object().cloned());
                    let sent = cx.send_request(request).block_task();
                    let outcome = tokio::select! {
                        response = sent => response.map(|r| match r.outcome {
                            RequestPermissionOutcome::Selected(chosen) => {
                                Some(chosen.option_id.0.to_string())
                            }
                            _ => None,
                        }),
                        // Dropping the request sends `$/cancel_request` (SDK guide §4, rule 5).
                        () = cancel.cancelled() => Ok(None),
                    };
                    // The card's title again (the question had it).
                    let view = present_call(call, &ask.cwd);
                    let title = bridge::title(&view, *features);
                    self.face.send(
                        |_| {
                            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                                id.clone(),
                                ToolCallUpdateFields::new().title(title.clone()),
                            ))
                        },
                        |_| None,
                    );
                    outcome
                }
                Face::V2 { cx, session_id, .. } => {
                    let options = choices
                        .iter()
                        .map(|c| {
                            let kind = match c.answer {
                                Answer::Once => v2::PermissionOptionKind::AllowOnce,
                                Answer::Session | Answer::Always => {
                                    v2::PermissionOptionKind::AllowAlways
                                }
                                _ => v2::PermissionOptionKind::RejectOnce,
                            };
                            v2::PermissionOption::new(c.id, c.name.clone(), kind)
                        })
                        .collect();
                    let subject =
                        v2::CommandPermissionSubject::new(ask.command.clone(), ask.cwd.clone())
                            .tool_call_id(v2::ToolCallId::new(call_id.to_string()))
                            .terminal_id(v2::TerminalId::new(call_id.to_string()));
                    let request = v2::RequestPermissionRequest::new(
                        (*session_id).clone(),
                        ask.title(),
                        options,
                    )
                    .description(ask.refusal.what())
                    .subject(v2::RequestPermissionSubject::Command(subject))
                    .meta(meta.as_object().cloned());
                    let sent = cx.send_request(request).block_task();
                    tokio::select! {
                        response = sent => response.map(|r| match r.outcome {
                            v2::RequestPermissionOutcome::Selected(chosen) => {
                                Some(chosen.option_id.0.to_string())
                            }
                            _ => None,
                        }),
                        () = cancel.cancelled() => Ok(None),
                    }
                }
            };
            match selected {
                // An option not offered is not an approval (the schema's rule).
                Ok(Some(id)) => choices
                    .iter()
                    .find(|c| c.id == id)
                    .map_or(Answer::Reject, |c| c.answer),
                Ok(None) => Answer::Dismissed,
                Err(error) => {
                    tracing::info!(%error, "the client did not answer session/request_permission");
                    Answer::NotAsked
                }
            }
        }
        .boxed()
    }

    fn mcp_tools(&self) -> BoxFuture<'_, Vec<McpTool>> {
        async move {
            let servers = self.state.mcp.lock().unwrap().clone();
            let tools = servers.tools().await;
            for news in servers.take_news() {
                self.message(&format!("{news}\n\n"));
            }
            tools
        }
        .boxed()
    }

    fn run_mcp<'b>(
        &'b self,
        call_id: &'b str,
        tool: &'b McpTool,
        arguments: serde_json::Value,
        cancel: &'b CancellationToken,
    ) -> BoxFuture<'b, McpResult> {
        async move {
            let call_id = ToolCallId::new(call_id.to_string());
            let view = present_mcp_call(tool, &arguments);
            let opened = super::mcp::call_opened(&call_id, &view);
            let upsert = super::mcp::call_opened_upsert(&call_id, &view);
            self.face
                .send(|_| opened.clone(), |_| to_v2(upsert.clone()));
            let servers = self.state.mcp.lock().unwrap().clone();
            let result = servers.call(&tool.qualified, arguments, cancel).await;
            let ended =
                super::mcp::call_ended(&call_id, &mcp_result_text(&result), result.is_error);
            self.face.send(|_| ended.clone(), |_| to_v2(ended.clone()));
            result
        }
        .boxed()
    }

    fn run_command(&self, command: SlashCommand) -> BoxFuture<'_, String> {
        async move {
            let new_call_id = || self.state.new_call_id();
            let behind = self.connection.client_behind.clone();
            let sink = move || -> Box<dyn UpdateSink> { self.face.sink(Some(behind.clone())) };
            let turn = CommandTurn {
                sink: &sink,
                v2: self.face.v2(),
                session: &self.state.session,
                jobs: &self.state.jobs,
                log: &self.state.log,
                features: self.face.runner().features,
                limits: self.connection.limits,
                new_call_id: &new_call_id,
                permits: Some(self.state.permits.clone()),
            };
            let (answer, card) = turn.run(command).await;
            self.message(&answer);
            *self.card.lock().unwrap() = card;
            answer
        }
        .boxed()
    }
}

/// What a permission question carries under `_meta["acp-bash"]`: what was refused, in fields
/// a client can read.
fn permission_meta(ask: &Ask) -> serde_json::Value {
    let refused = match &ask.refusal {
        crate::permit::Refusal::Host { host } => json!({"kind": "host", "host": host}),
        crate::permit::Refusal::Write { path, mode } => {
            json!({"kind": "write", "path": path, "mode": mode.id()})
        }
        crate::permit::Refusal::Network => json!({"kind": "network", "mode": "read-only"}),
    };
    json!({"acp-bash": {"refused": refused, "why": ask.refusal.what(), "prefix": ask.prefix}})
}

/// A v1 update whose shape v2 keeps (commands, usage, session info) as its v2 update.
pub(super) fn to_v2(update: SessionUpdate) -> Option<v2::SessionUpdate> {
    let value = serde_json::to_value(&update).ok()?;
    match serde_json::from_value(value) {
        Ok(update) => Some(update),
        Err(error) => {
            tracing::error!(%error, ?update, "a v1 update with no v2 shape: not sent");
            None
        }
    }
}

/// A prompt's ACP content as the driver reads it.
pub fn prompt_of(blocks: &[ContentBlock]) -> Prompt {
    let blocks = blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => PromptBlock::Text(text.text.clone()),
            ContentBlock::Resource(resource) => match &resource.resource {
                EmbeddedResourceResource::TextResourceContents(text) => PromptBlock::Resource {
                    uri: text.uri.clone(),
                    text: Some(text.text.clone()),
                    mime_type: text.mime_type.clone(),
                },
                EmbeddedResourceResource::BlobResourceContents(blob) => PromptBlock::Resource {
                    uri: blob.uri.clone(),
                    text: None,
                    mime_type: blob.mime_type.clone(),
                },
                _ => PromptBlock::Other {
                    kind: "resource".into(),
                },
            },
            ContentBlock::ResourceLink(link) => PromptBlock::Link {
                uri: link.uri.clone(),
                name: link.name.clone(),
            },
            ContentBlock::Image(image) => PromptBlock::Image {
                mime_type: image.mime_type.clone(),
                data: image.data.clone(),
            },
            ContentBlock::Audio(_) => PromptBlock::Other {
                kind: "audio".into(),
            },
            _ => PromptBlock::Other {
                kind: "other".into(),
            },
        })
        .collect();
    Prompt::new(blocks)
}

/// The text of a prompt: its text blocks (and embedded text resources) joined by newlines.
/// Images, audio and links carry no script and are ignored.
pub fn prompt_text(blocks: &[ContentBlock]) -> String {
    prompt_of(blocks).text()
}
