//! The ACP v2 face (draft v2, the SDK's `unstable_protocol_v2`): what a client that asked for
//! protocol version 2 at `initialize` is served. The SDK's protocol router picks it; every
//! other `initialize` gets the v1 face unchanged.
//!
//! Owns: the v2 handlers (`initialize`, `session/new`, `session/prompt`, `session/cancel`,
//! `session/close`, `session/resume` with its replay, `terminal/cancel`,
//! `session/set_config_option`), the session's state
//! on the v2 wire (`state_update` `running` / `idle` with the stop reason, and the
//! `background` list of the jobs still running, sent again when a job ends), and the
//! session's config options on the v2 wire. A turn runs through the one turn port of
//! [`super::turn`] on its [`Face::V2`] (messages with message ids, each call an agent-owned
//! terminal through [`crate::acp::call_wire::CallWire::open_v2`]). Must not touch: how a call
//! looks on the v2 wire ([`crate::acp::v2`]), what a prompt means (the driver's), what is
//! recorded (the turn's), the v1 face.
//!
//! Concurrency as on the v1 face: handlers only validate, register and `cx.spawn`; a turn waits
//! for the session's earlier turn inside its task; calls run on the connection's tracked tasks.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema as v1;
use agent_client_protocol::v2::schema::{
    self as v2, BackgroundTerminal, BackgroundWork, CancelSessionNotification,
    CancelTerminalRequest, CancelTerminalResponse, CloseSessionRequest, CloseSessionResponse,
    IdleStateUpdate, InitializeRequest, InitializeResponse, NewSessionRequest, NewSessionResponse,
    PromptRequest, PromptResponse, ResumeSessionRequest, ResumeSessionResponse, RunningStateUpdate,
    SessionUpdate, SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, StateUpdate,
};
use agent_client_protocol::v2::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, Error, ErrorCode};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::errors::{invalid_params, short};
use super::session::{random_session_id, SessionState};
use super::turn::{to_v2, Face};
use super::Connection;
use crate::acp::call_wire::UpdateSink;
use crate::acp::commands::JobCard;
use crate::acp::replay::{replay_v2, Replayed};
use crate::acp::v2::V2Sink;
use crate::driver::{Prompt, StopReason};
use crate::store::SessionRecord;

impl Connection {
    /// The v2 face's handlers, on the same connection state as the v1 face's.
    pub(super) fn v2_face(self: &Arc<Self>) -> impl ConnectTo<Client> {
        /// Registers `Connection::$method` for v2 requests of type `$request`.
        macro_rules! route {
            ($builder:expr, $request:ty => $method:ident) => {{
                let connection = self.clone();
                $builder.on_receive_request(
                    async move |request: $request, responder, cx| {
                        connection.clone().$method(request, responder, cx)
                    },
                    agent_client_protocol::on_receive_request!(),
                )
            }};
        }
        // Tests look for this line: a v1 connection never builds the v2 face.
        tracing::debug!("building the ACP v2 face");
        let builder = Agent.v2().name("acp-bash");
        let builder = route!(builder, InitializeRequest => v2_initialize);
        let builder = route!(builder, NewSessionRequest => v2_new_session);
        let builder = route!(builder, PromptRequest => v2_prompt);
        let builder = route!(builder, CloseSessionRequest => v2_close);
        let builder = route!(builder, ResumeSessionRequest => v2_resume);
        let builder = route!(builder, CancelTerminalRequest => v2_cancel_terminal);
        let builder = route!(builder, SetSessionConfigOptionRequest => v2_set_config_option);
        let on_cancel = self.clone();
        builder.on_receive_notification(
            async move |notification: CancelSessionNotification, _cx| {
                // Turns only: the session's jobs keep running (session/close stops them).
                on_cancel.cancel(&v1_session_id(&notification.session_id));
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
    }

    fn v2_initialize(
        self: Arc<Self>,
        request: InitializeRequest,
        responder: Responder<InitializeResponse>,
        _cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        tracing::info!(client = %request.info.name, "initialize (ACP v2)");
        let answered = responder.respond(
            InitializeResponse::new(
                request.protocol_version,
                v2::Implementation::new("acp-bash", env!("CARGO_PKG_VERSION")).title("acp-bash"),
            )
            .capabilities(
                v2::AgentCapabilities::new().session(v2_session_capabilities(self.driver.as_ref())),
            ),
        );
        self.engine.prepare_in_background();
        answered
    }

    fn v2_new_session(
        self: Arc<Self>,
        request: NewSessionRequest,
        responder: Responder<NewSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let cwd: &std::path::Path = request.cwd.as_ref();
        let mcp = match super::mcp::v2_server_configs(&request.mcp_servers) {
            Ok(configs) => configs,
            Err(why) => {
                return responder.respond_with_error(invalid_params(
                    why,
                    json!({ "mcpServers": request.mcp_servers.len() }),
                ))
            }
        };
        let session = match self.engine.session(cwd) {
            Ok(session) => session,
            Err(error) => {
                tracing::info!(%error, "session/new refused");
                return responder.respond_with_error(invalid_params(
                    short(&error.to_string()),
                    json!({ "cwd": short(&cwd.to_string_lossy()) }),
                ));
            }
        };
        let number = self.next_session.fetch_add(1, Ordering::Relaxed);
        let id = random_session_id();
        let record = SessionRecord::new(
            &id.0,
            cwd.to_path_buf(),
            session.mode().id(),
            crate::store::now_ms(),
        );
        tracing::info!(session = %id.0, cwd = %cwd.display(), "session/new (ACP v2)");
        let state = self.open(id.clone(), number, session, record);
        self.start_mcp_configs(&state, mcp, Vec::new());
        // The providers' model lists, in the background (not waited for here).
        drop(self.driver.session_opening());
        let v2_id = v2_session_id(&id);
        responder.respond(
            NewSessionResponse::new(v2_id.clone()).config_options(self.v2_config_options(&state)),
        )?;
        let mut sink = V2Sink::new(cx, v2_id);
        if let Some(commands) = to_v2(crate::acp::commands::available_commands()) {
            sink.send_v2(commands);
        }
        sink.send_v2(idle(&state, None));
        Ok(())
    }

    /// Answers at once with the user message's id, then runs the turn as a connection task:
    /// the user message, `running`, the turn, `idle` with its stop reason.
    fn v2_prompt(
        self: Arc<Self>,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let session_id = v1_session_id(&request.session_id);
        let state = match self.session_state(&session_id) {
            Ok(state) => state,
            Err(error) => return responder.respond_with_error(error),
        };
        let blocks: Vec<v1::ContentBlock> = request
            .prompt
            .iter()
            .filter_map(|block| serde_json::to_value(block).ok())
            .filter_map(|block| serde_json::from_value(block).ok())
            .collect();
        let prompt = super::prompt_of(&blocks);
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
        let user_message_id = v2::MessageId::new(format!("user-{}-{turn}", state.number));
        responder.respond(PromptResponse::new(user_message_id.clone()))?;
        let task_cx = cx.clone();
        cx.spawn(async move {
            let mut sink = V2Sink::new(task_cx.clone(), request.session_id.clone());
            let (stop, card) = {
                let _turn = state.turn.lock().await;
                sink.send_v2(SessionUpdate::UserMessage(
                    v2::UserMessage::new(user_message_id).content(request.prompt.clone()),
                ));
                state.v2_foreground.store(true, Ordering::SeqCst);
                sink.send_v2(running(&state));
                let ended = self
                    .v2_turn(&task_cx, &request.session_id, &state, &prompt, &token, turn)
                    .await;
                state.running.lock().unwrap().remove(&turn);
                state.v2_foreground.store(false, Ordering::SeqCst);
                ended
            };
            // A job started by `/bg` is listed as background work from this idle on.
            let card =
                card.map(|card| self.v2_job_card(card, &task_cx, &request.session_id, &state));
            sink.send_v2(idle(&state, Some(stop)));
            if let Some(card) = card {
                card.spawn(&self.runs);
            }
            Ok(())
        })
    }

    /// A job's card on the v2 face: when it ends (its terminal's `exitStatus` sent), the
    /// session's state again with the job gone from `background`.
    fn v2_job_card(
        &self,
        card: JobCard,
        cx: &ConnectionTo<Client>,
        session_id: &v2::SessionId,
        state: &Arc<SessionState>,
    ) -> JobCard {
        let mut sink = V2Sink::new(cx.clone(), session_id.clone());
        let state = Arc::downgrade(state);
        card.after_end(move || {
            if let Some(state) = state.upgrade() {
                let update = match state.v2_foreground.load(Ordering::SeqCst) {
                    true => running(&state),
                    false => idle(&state, None),
                };
                sink.send_v2(update);
            }
        })
    }

    /// One turn of `state` for `prompt` on the v2 face (the session's turn lock is held): the
    /// shared turn ([`Connection::turn_on`]) on [`Face::V2`]; a failed turn is the `error`
    /// stop reason (the prompt was answered long before).
    async fn v2_turn(
        &self,
        cx: &ConnectionTo<Client>,
        session_id: &v2::SessionId,
        state: &Arc<SessionState>,
        prompt: &Prompt,
        token: &CancellationToken,
        turn: u64,
    ) -> (v2::StopReason, Option<JobCard>) {
        let face = Face::V2 {
            cx,
            session_id,
            session: state.number,
            turn,
            messages: Mutex::new(0),
        };
        let (ended, card) = self.turn_on(face, state, prompt, token).await;
        let stop = match ended {
            Ok(stop) => v2_stop_reason(stop),
            Err(error) => error_stop(error),
        };
        (stop, card)
    }

    /// `session/close`: kills the running command and the session's jobs (their terminals end
    /// with `exitStatus`), frees the session, answers once they are gone. Closing an unknown or
    /// closed session succeeds (the draft: closing is idempotent).
    fn v2_close(
        self: Arc<Self>,
        request: CloseSessionRequest,
        responder: Responder<CloseSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let id = v1_session_id(&request.session_id);
        let Some(state) = self.deactivate(&id) else {
            return responder.respond(CloseSessionResponse::new());
        };
        tracing::info!(session = %id.0, "session/close (ACP v2)");
        cx.spawn(async move {
            self.wait_until_stopped(&id, state).await;
            if let Err(error) = responder.respond(CloseSessionResponse::new()) {
                tracing::debug!(%error, "could not answer session/close");
            }
            Ok(())
        })
    }

    /// `session/resume`: the active session, or the stored one made active; with `replayFrom:
    /// start`, its history first (each call and job one terminal with one `output` snapshot),
    /// then the session's state.
    fn v2_resume(
        self: Arc<Self>,
        request: ResumeSessionRequest,
        responder: Responder<ResumeSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let id = v1_session_id(&request.session_id);
        let active = self.sessions.lock().unwrap().get(&id).cloned();
        let (state, notes) = match (active, &self.store) {
            (Some(state), _) => (state, Vec::new()),
            (None, Some(_)) => match self.active_or_restored(&id, request.cwd.as_ref()) {
                Ok(restored) => restored,
                Err(error) => return responder.respond_with_error(error),
            },
            (None, None) => return responder.respond_with_error(self.inactive_session(&id)),
        };
        let replay = match &request.replay_from {
            None => false,
            Some(v2::ReplayFrom::Start(_)) => true,
            Some(_) => {
                return responder.respond_with_error(invalid_params(
                    "acp-bash replays from the start only (replayFrom: {\"type\": \"start\"})"
                        .to_string(),
                    json!({ "sessionId": id }),
                ))
            }
        };
        // The complete set of the client's servers now (v2: none restored from before).
        match super::mcp::v2_server_configs(&request.mcp_servers) {
            Ok(configs) => self.start_mcp_configs(&state, configs, Vec::new()),
            Err(why) => {
                return responder.respond_with_error(invalid_params(
                    why,
                    json!({ "mcpServers": request.mcp_servers.len() }),
                ))
            }
        }
        let mut sink = V2Sink::new(cx, request.session_id.clone());
        let mut messages = 0u64;
        let mut message_id = |kind: &str| {
            messages += 1;
            v2::MessageId::new(format!("replay-{kind}-{}-{messages}", state.number))
        };
        if replay {
            let current = state.current_call.lock().unwrap().clone();
            let updates = replay_v2(&state.log.record(), |call| {
                current.as_deref() == Some(call) || state.jobs.card_open(call)
            });
            tracing::info!(session = %id.0, updates = updates.len(), "session/resume replay (ACP v2)");
            for update in updates {
                let update = match update {
                    Replayed::V2(update) => Some(update),
                    Replayed::V1(v1::SessionUpdate::UserMessageChunk(chunk)) => {
                        to_v2_block(&chunk.content).map(|block| {
                            SessionUpdate::UserMessage(
                                v2::UserMessage::new(message_id("user")).content(vec![block]),
                            )
                        })
                    }
                    Replayed::V1(v1::SessionUpdate::AgentMessageChunk(chunk)) => {
                        to_v2_block(&chunk.content).map(|block| {
                            SessionUpdate::AgentMessage(
                                v2::AgentMessage::new(message_id("agent")).content(vec![block]),
                            )
                        })
                    }
                    Replayed::V1(update) => to_v2(update),
                };
                if let Some(update) = update {
                    sink.send_v2(update);
                }
            }
        }
        for note in notes {
            sink.send_v2(SessionUpdate::AgentMessage(
                v2::AgentMessage::new(message_id("agent")).content(vec![note.into()]),
            ));
        }
        if let Some(commands) = to_v2(crate::acp::commands::available_commands()) {
            sink.send_v2(commands);
        }
        let update = match state.v2_foreground.load(Ordering::SeqCst) {
            true => running(&state),
            false => idle(&state, None),
        };
        sink.send_v2(update);
        responder
            .respond(ResumeSessionResponse::new().config_options(self.v2_config_options(&state)))
    }

    /// The session's config options (the sandbox mode; the model with a model driver) on the
    /// v2 wire: the v1 face's list, whose shape v2 keeps but for the option's id (v1 `id`, v2
    /// `configId`).
    fn v2_config_options(&self, state: &SessionState) -> Vec<v2::SessionConfigOption> {
        self.config_options(state)
            .into_iter()
            .filter_map(|option| {
                let mut value = serde_json::to_value(&option).ok()?;
                let object = value.as_object_mut()?;
                let id = object.remove("id")?;
                object.insert("configId".to_string(), id);
                serde_json::from_value(value)
                    .inspect_err(
                        |error| tracing::error!(%error, "a config option with no v2 shape"),
                    )
                    .ok()
            })
            .collect()
    }

    /// `session/set_config_option`: as on the v1 face (the same checks and errors); the answer
    /// carries the whole list. v2 has no modes, so nothing else is announced.
    fn v2_set_config_option(
        self: Arc<Self>,
        request: SetSessionConfigOptionRequest,
        responder: Responder<SetSessionConfigOptionResponse>,
        _cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let id = v1_session_id(&request.session_id);
        let state = match self.session_state(&id) {
            Ok(state) => state,
            Err(error) => return responder.respond_with_error(error),
        };
        // `{"type": "id", "value": ...}` or another type (boolean, future ones).
        let value = serde_json::to_value(&request.value).unwrap_or_default();
        let value_id = (value["type"] == "id")
            .then(|| value["value"].as_str().map(str::to_string))
            .flatten();
        let quoted = match &value["value"] {
            serde_json::Value::String(text) => json!(short(text)),
            serde_json::Value::Bool(flag) => json!(flag),
            _ => serde_json::Value::Null,
        };
        match self.change_config_option(&state, &id.0, &request.config_id.0, value_id, quoted) {
            Ok(_) => responder.respond(SetSessionConfigOptionResponse::new(
                self.v2_config_options(&state),
            )),
            Err(error) => responder.respond_with_error(error),
        }
    }

    /// `terminal/cancel`: kills that call's or job's whole tree (its terminal then ends with
    /// `exitStatus`). `-32602` for a terminal this session does not run now: unknown, another
    /// session's, or exited.
    fn v2_cancel_terminal(
        self: Arc<Self>,
        request: CancelTerminalRequest,
        responder: Responder<CancelTerminalResponse>,
        _cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let id = v1_session_id(&request.session_id);
        let terminal = request.terminal_id.0.to_string();
        let state = self.sessions.lock().unwrap().get(&id).cloned();
        let not_running = || {
            Error::new(
                ErrorCode::INVALID_PARAMS,
                format!(
                    "session {:?} runs no terminal {:?} now (unknown, of another session, or \
                     already exited): only a terminal that advertises capabilities.cancel can \
                     be cancelled",
                    short(&id.0),
                    short(&terminal)
                ),
            )
            .data(json!({ "sessionId": short(&id.0), "terminalId": short(&terminal) }))
        };
        let Some(state) = state else {
            return responder.respond_with_error(not_running());
        };
        if let Some(token) = state.v2_calls.lock().unwrap().get(&terminal) {
            tracing::info!(session = %id.0, terminal, "terminal/cancel of a call");
            token.cancel();
            return responder.respond(CancelTerminalResponse::new());
        }
        let job = state
            .jobs
            .open_cards()
            .into_iter()
            .find(|(_, call)| *call.0 == *terminal);
        match job {
            Some((job, _)) if state.jobs.registry.kill(job).is_some() => {
                tracing::info!(session = %id.0, terminal, %job, "terminal/cancel of a job");
                responder.respond(CancelTerminalResponse::new())
            }
            _ => responder.respond_with_error(not_running()),
        }
    }
}

/// The session's jobs still running (their cards open): each listed as its terminal.
/// What the v2 face advertises of sessions: MCP servers over stdio, and streamable HTTP where
/// the build has it; the prompt's content as the v1 face does (embedded context and images as
/// the driver takes them: a model driver both; the shell driver neither, so none is listed).
fn v2_session_capabilities(driver: &dyn crate::driver::Driver) -> v2::SessionCapabilities {
    let mut mcp = v2::McpCapabilities::new().stdio(v2::McpStdioCapabilities::new());
    if crate::mcp::HTTP_SUPPORTED {
        mcp = mcp.http(v2::McpHttpCapabilities::new());
    }
    let prompt = v2::PromptCapabilities::new()
        .embedded_context(
            driver
                .embedded_context()
                .then(v2::PromptEmbeddedContextCapabilities::new),
        )
        .image(driver.images().then(v2::PromptImageCapabilities::new));
    // Omitted (the baseline: text and links) when the driver takes neither.
    let extended = driver.images() || driver.embedded_context();
    v2::SessionCapabilities::new()
        .mcp(mcp)
        .prompt(extended.then_some(prompt))
}

fn background(state: &SessionState) -> Vec<BackgroundWork> {
    state
        .jobs
        .open_cards()
        .into_iter()
        .map(|(_, call)| {
            BackgroundWork::Terminal(BackgroundTerminal::new(v2::TerminalId::new(
                call.0.to_string(),
            )))
        })
        .collect()
}

fn running(state: &SessionState) -> SessionUpdate {
    SessionUpdate::StateUpdate(StateUpdate::Running(
        RunningStateUpdate::new().background(background(state)),
    ))
}

fn idle(state: &SessionState, stop: Option<v2::StopReason>) -> SessionUpdate {
    let mut idle = IdleStateUpdate::new().background(background(state));
    idle.stop_reason = stop;
    SessionUpdate::StateUpdate(StateUpdate::Idle(idle))
}

fn v2_stop_reason(stop: StopReason) -> v2::StopReason {
    match stop {
        StopReason::EndTurn => v2::StopReason::EndTurn,
        StopReason::MaxTokens => v2::StopReason::MaxTokens,
        StopReason::MaxTurnRequests => v2::StopReason::MaxTurnRequests,
        StopReason::Refusal => v2::StopReason::Refusal,
        StopReason::Cancelled => v2::StopReason::Cancelled,
    }
}

/// A turn that failed: v2 reports it as the `error` stop reason (the prompt was answered long
/// before).
fn error_stop(error: Error) -> v2::StopReason {
    let error = serde_json::to_value(&error)
        .ok()
        .and_then(|error| serde_json::from_value::<v2::Error>(error).ok());
    v2::StopReason::Error(v2::ErrorStopReason::new().error(error))
}

fn v1_session_id(id: &v2::SessionId) -> v1::SessionId {
    v1::SessionId::new(id.0.to_string())
}

fn v2_session_id(id: &v1::SessionId) -> v2::SessionId {
    v2::SessionId::new(id.0.to_string())
}

/// A v1 content block as v2's (the same shape for text).
fn to_v2_block(block: &v1::ContentBlock) -> Option<v2::ContentBlock> {
    serde_json::from_value(serde_json::to_value(block).ok()?).ok()
}
