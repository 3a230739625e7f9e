//! The ACP agent: the request handlers and the per-connection state.
//!
//! Owns: `initialize` (remembering what the client renders), `session/new` (one engine session
//! per ACP session, each with its own working directory), `session/prompt` (one bash call per
//! prompt, run outside the dispatch loop), `session/cancel` (kills the running command at once),
//! the session lifecycle beyond `session/new` (list, load, resume, close, delete: in `lifecycle`),
//! and shutdown on stdin EOF (every running command is cancelled before [`AcpBashAgent::serve`]
//! returns). Must not touch: how a call looks on the wire (that is [`super::bridge`]), how output
//! is batched ([`super::stream`]), how commands run (the engine).
//!
//! Concurrency (see the SDK guide §4/§5): handlers only validate, register and `cx.spawn` the turn;
//! they never await anything that needs a later inbound message. The command itself runs on a
//! tokio task (tracked, so that shutdown can wait for the kill), and streams its chunks back to
//! the turn over a channel. Turns of one session run one after another; turns of different
//! sessions run at the same time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CancelNotification, CloseSessionRequest, ContentBlock, DeleteSessionRequest,
    EmbeddedResourceResource, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, LoadSessionRequest, NewSessionRequest, NewSessionResponse, PromptRequest,
    PromptResponse, ResumeSessionRequest, SessionId, SessionUpdate, SetSessionModeRequest,
    SetSessionModeResponse, StopReason, ToolCallId, ToolCallUpdateFields,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, Error, ErrorCode};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::bridge::{self, ClientFeatures};
use super::commands::{self as slash, CommandTurn, SessionJobs};
use super::modes::{ModeChoice, SandboxModes};
use super::stream::StreamLimits;
use super::tool_call::{ConnectionSink, ToolCallRunner, UpdateSink};
use super::transport::ClientBehind;
use crate::driver::{call_from_prompt, commands::SlashCommand};
use crate::exec::{Engine, Session};
use crate::jobs::{JobLimits, JobRegistry};
use crate::present::{console_block, present_call, ResultView};
use crate::sandbox;
use crate::store::{SessionLog, SessionRecord, Store};
use crate::tool::BashCall;

mod lifecycle;

/// How long [`AcpBashAgent::serve`] waits, after the client went away, for cancelled commands to
/// be killed and reaped before it returns anyway.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The largest prompt (its script text) the agent runs unless told otherwise: 1 MiB.
pub const DEFAULT_MAX_PROMPT_BYTES: usize = 1 << 20;

/// The acp-bash agent: serves one ACP connection with an [`Engine`].
///
/// Cheap to clone (the engine is shared); every connection gets fresh state.
#[derive(Clone)]
#[non_exhaustive]
pub struct AcpBashAgent {
    engine: Engine,
    limits: StreamLimits,
    job_limits: JobLimits,
    max_prompt_bytes: usize,
    client_behind: ClientBehind,
    store: Option<Store>,
}

impl AcpBashAgent {
    /// An agent that runs its commands on `engine`, with the default stream limits.
    pub fn new(engine: Engine) -> Self {
        AcpBashAgent {
            engine,
            limits: StreamLimits::default(),
            job_limits: JobLimits::default(),
            max_prompt_bytes: DEFAULT_MAX_PROMPT_BYTES,
            client_behind: ClientBehind::default(),
            store: None,
        }
    }

    /// Changes the limits of each session's background jobs (`/bg`): how many may run, their
    /// timeout.
    pub fn with_job_limits(mut self, job_limits: JobLimits) -> Self {
        self.job_limits = job_limits;
        self
    }

    /// Skips making live output while this flag is up (the transport's
    /// [`super::AgentStdio::client_behind`]): a client that does not read gets no more of it.
    pub fn with_client_behind(mut self, behind: ClientBehind) -> Self {
        self.client_behind = behind;
        self
    }

    /// Refuses prompts whose text is longer than this (default [`DEFAULT_MAX_PROMPT_BYTES`]).
    pub fn with_max_prompt_bytes(mut self, max_prompt_bytes: usize) -> Self {
        self.max_prompt_bytes = max_prompt_bytes;
        self
    }

    /// Keeps every session in `store`, so that it can be listed, loaded and resumed by this or
    /// a later agent process (`session/list`, `session/load`, `session/resume`,
    /// `session/delete`). Without a store nothing is written and only `session/close` is offered.
    pub fn with_session_store(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }

    /// Changes how live output is batched and capped, and whether clients without the card get a
    /// live console view (the defaults suit Zed, and acpx and Toad).
    pub fn with_stream_limits(mut self, limits: StreamLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Serves one connection until the client closes it (EOF), then cancels every running
    /// command and waits (at most a few seconds) for them to be killed.
    ///
    /// `transport` is usually [`agent_client_protocol::Stdio`].
    pub async fn serve(
        self,
        transport: impl ConnectTo<Agent>,
    ) -> agent_client_protocol::Result<()> {
        self.serve_until(transport, std::future::pending()).await
    }

    /// Like [`Self::serve`], but also stops when `stop` completes (a signal, say): the
    /// connection is dropped, and every running command is cancelled and reaped the same way.
    pub async fn serve_until(
        self,
        transport: impl ConnectTo<Agent>,
        stop: impl std::future::Future<Output = ()>,
    ) -> agent_client_protocol::Result<()> {
        let mut connection = Connection::new(self.engine, self.limits, self.job_limits, self.store);
        connection.max_prompt_bytes = self.max_prompt_bytes;
        connection.client_behind = self.client_behind;
        let connection = Arc::new(connection);
        let result = tokio::select! {
            result = connection.clone().handle(transport) => result,
            () = stop => Ok(()),
        };
        connection.shutdown().await;
        match result {
            Err(error) if client_closed_its_end(&error) => {
                tracing::info!(%error, "the client stopped reading: treating it as EOF");
                Ok(())
            }
            result => result,
        }
    }
}

impl ConnectTo<Client> for AcpBashAgent {
    async fn connect_to(self, client: impl ConnectTo<Agent>) -> agent_client_protocol::Result<()> {
        self.serve(client).await
    }
}

/// The state of one connection.
struct Connection {
    engine: Engine,
    limits: StreamLimits,
    job_limits: JobLimits,
    max_prompt_bytes: usize,
    client_behind: ClientBehind,
    /// Where sessions are kept; `None` with `--no-history`.
    store: Option<Store>,
    features: Mutex<ClientFeatures>,
    next_session: AtomicU64,
    sessions: Mutex<HashMap<SessionId, Arc<SessionState>>>,
    /// The tokio tasks that run commands: shutdown waits for them.
    runs: TaskTracker,
}

/// One ACP session: an engine session plus the calls it is running.
struct SessionState {
    number: u64,
    session: Session,
    /// The session's record, written to the store as it changes (shared with its jobs' cards,
    /// which record how each job ended).
    log: Arc<SessionLog>,
    /// The id of the call running now, if any.
    current_call: Mutex<Option<String>>,
    next_call: AtomicU64,
    /// Held for a whole turn: a session's prompts run one after another.
    turn: tokio::sync::Mutex<()>,
    /// The tokens of the turns that are running or waiting for `turn`, by turn number.
    running: Mutex<HashMap<u64, CancellationToken>>,
    next_turn: AtomicU64,
    /// The session's background jobs (`/bg`): killed when the session or the connection ends.
    jobs: SessionJobs,
}

impl SessionState {
    /// The id of the session's next tool call: `call-SESSION-N`, unique on the connection.
    fn new_call_id(&self) -> ToolCallId {
        let n = self.next_call.fetch_add(1, Ordering::Relaxed);
        ToolCallId::new(format!("call-{}-{n}", self.number))
    }

    fn cancel_all(&self) {
        for token in self.running.lock().unwrap().values() {
            token.cancel();
        }
    }
}

fn unknown_session(session_id: &SessionId) -> Error {
    Error::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("unknown session: {:?}", short(&session_id.0)),
    )
    .data(json!({ "sessionId": short(&session_id.0) }))
}

/// A client-supplied text as an error may quote it: cut after 100 bytes (on a character
/// boundary), so that an error never echoes a whole input back.
fn short(text: &str) -> String {
    const MAX: usize = 100;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// A new session id: 128 random bits from the kernel, so that ids never repeat across
/// processes (clients such as acpx key their records by it).
fn random_session_id() -> SessionId {
    let mut bytes = [0u8; 16];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: getrandom writes at most the given length into the buffer we own.
        let n = unsafe {
            libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
        };
        if n > 0 {
            filled += n as usize;
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            panic!("getrandom failed: {}", std::io::Error::last_os_error());
        }
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    SessionId::new(format!("sess-{hex}"))
}

fn invalid_params(message: String, data: serde_json::Value) -> Error {
    Error::new(ErrorCode::INVALID_PARAMS, message).data(data)
}

impl Connection {
    fn new(
        engine: Engine,
        limits: StreamLimits,
        job_limits: JobLimits,
        store: Option<Store>,
    ) -> Self {
        Connection {
            engine,
            limits,
            job_limits,
            max_prompt_bytes: DEFAULT_MAX_PROMPT_BYTES,
            client_behind: ClientBehind::default(),
            store,
            features: Mutex::new(ClientFeatures::default()),
            next_session: AtomicU64::new(1),
            sessions: Mutex::new(HashMap::new()),
            runs: TaskTracker::new(),
        }
    }

    async fn handle(
        self: Arc<Self>,
        transport: impl ConnectTo<Agent>,
    ) -> agent_client_protocol::Result<()> {
        let (on_init, on_new, on_prompt, on_mode, on_cancel) = (
            self.clone(),
            self.clone(),
            self.clone(),
            self.clone(),
            self.clone(),
        );
        let (on_list, on_load, on_resume, on_close, on_delete) =
            (self.clone(), self.clone(), self.clone(), self.clone(), self);
        Agent
            .v1()
            .name("acp-bash")
            .on_receive_request(
                async move |request: ListSessionsRequest, responder, cx| {
                    on_list.list(request, responder, cx)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: LoadSessionRequest, responder, cx| {
                    on_load.load(request, responder, cx)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: ResumeSessionRequest, responder, cx| {
                    on_resume.resume(request, responder, cx)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: CloseSessionRequest, responder, cx| {
                    on_close.clone().close(request, responder, cx)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: DeleteSessionRequest, responder, cx| {
                    on_delete.clone().delete(request, responder, cx)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: InitializeRequest, responder, _cx| {
                    on_init.initialize(request, responder)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: NewSessionRequest, responder, cx| {
                    on_new.new_session(request, responder, cx)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: PromptRequest, responder, cx| {
                    on_prompt.clone().prompt(request, responder, cx)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: SetSessionModeRequest, responder, _cx| {
                    on_mode.set_mode(request, responder)
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_notification(
                async move |notification: CancelNotification, _cx| {
                    on_cancel.cancel(&notification.session_id);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_to(transport)
            .await
    }

    fn initialize(
        &self,
        request: InitializeRequest,
        responder: Responder<InitializeResponse>,
    ) -> agent_client_protocol::Result<()> {
        let features = ClientFeatures::from_capabilities(&request.client_capabilities);
        tracing::info!(
            card = features.terminal_output,
            terminal = features.terminal,
            "initialize"
        );
        *self.features.lock().unwrap() = features;
        let answered = responder.respond(
            InitializeResponse::new(request.protocol_version)
                .agent_capabilities(self.capabilities())
                .agent_info(
                    Implementation::new("acp-bash", env!("CARGO_PKG_VERSION")).title("acp-bash"),
                ),
        );
        // The scrub and the sandbox probe take milliseconds: do them now that the client has
        // its answer, before the first session or command needs them.
        self.engine.prepare_in_background();
        answered
    }

    fn new_session(
        &self,
        request: NewSessionRequest,
        responder: Responder<NewSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let session = match self.engine.session(&request.cwd) {
            Ok(session) => session,
            Err(error) => {
                tracing::info!(%error, "session/new refused");
                return responder.respond_with_error(invalid_params(
                    short(&error.to_string()),
                    json!({ "cwd": short(&request.cwd.to_string_lossy()) }),
                ));
            }
        };
        let modes = SandboxModes::new(self.off_allowed()).state(session.mode());
        let number = self.next_session.fetch_add(1, Ordering::Relaxed);
        let id = random_session_id();
        let record = SessionRecord::new(
            &id.0,
            request.cwd.clone(),
            session.mode().id(),
            crate::store::now_ms(),
        );
        tracing::info!(session = %id.0, cwd = %request.cwd.display(), "session/new");
        self.open(id.clone(), number, session, record);
        responder.respond(NewSessionResponse::new(id.clone()).modes(modes))?;
        // After the answer, so that the client knows the session the commands are for.
        cx.send_notification(agent_client_protocol::v1::schema::SessionNotification::new(
            id,
            slash::available_commands(),
        ))
    }

    /// Makes `session` (with its `record`) an active session of this connection.
    fn open(
        &self,
        id: SessionId,
        number: u64,
        session: Session,
        record: SessionRecord,
    ) -> Arc<SessionState> {
        let state = Arc::new(SessionState {
            number,
            // Call ids continue after every call and job the session ever made, so a replayed
            // call and a new one never share an id.
            next_call: AtomicU64::new(record.calls_and_jobs() + 1),
            session,
            log: Arc::new(SessionLog::new(self.store.clone(), record)),
            current_call: Mutex::new(None),
            turn: tokio::sync::Mutex::new(()),
            running: Mutex::new(HashMap::new()),
            next_turn: AtomicU64::new(1),
            jobs: SessionJobs::new(JobRegistry::new(self.job_limits)),
        });
        self.sessions.lock().unwrap().insert(id, state.clone());
        state
    }

    /// Whoever started the agent chose `--sandbox off`: only then may a session choose it.
    fn off_allowed(&self) -> bool {
        self.engine.config().sandbox_mode == sandbox::Mode::Off
    }

    /// The session `id` names, or the error that says it is unknown.
    fn session_state(&self, id: &SessionId) -> Result<Arc<SessionState>, Error> {
        let state = self.sessions.lock().unwrap().get(id).cloned();
        state.ok_or_else(|| self.inactive_session(id))
    }

    /// `session/set_mode`: the sandbox mode for the session's next commands.
    fn set_mode(
        &self,
        request: SetSessionModeRequest,
        responder: Responder<SetSessionModeResponse>,
    ) -> agent_client_protocol::Result<()> {
        let state = match self.session_state(&request.session_id) {
            Ok(state) => state,
            Err(error) => return responder.respond_with_error(error),
        };
        let modes = SandboxModes::new(self.off_allowed());
        let why = match modes.parse(&request.mode_id.0) {
            ModeChoice::Sandbox(mode) => Ok(mode),
            ModeChoice::NotOffered(why) => Err(why),
            ModeChoice::Other => Err(format!("unknown mode {:?}", short(&request.mode_id.0))),
        };
        let mode = match why {
            Ok(mode) => mode,
            Err(why) => {
                let ids: Vec<String> = modes
                    .modes()
                    .into_iter()
                    .map(|m| m.id.0.to_string())
                    .collect();
                return responder.respond_with_error(invalid_params(
                    format!("{why}: the modes are {}", ids.join(", ")),
                    json!({ "modeId": short(&request.mode_id.0), "availableModes": ids }),
                ));
            }
        };
        tracing::info!(session = %request.session_id.0, mode = mode.id(), "session/set_mode");
        state.session.set_mode(mode);
        state.log.set_mode(mode.id());
        responder.respond(SetSessionModeResponse::new())
    }

    /// Validates the prompt, then runs the turn as a connection task and returns at once.
    fn prompt(
        self: Arc<Self>,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let state = match self.session_state(&request.session_id) {
            Ok(state) => state,
            Err(error) => return responder.respond_with_error(error),
        };
        let text = prompt_text(&request.prompt);
        if text.len() > self.max_prompt_bytes {
            return responder.respond_with_error(invalid_params(
                format!(
                    "the prompt is {} bytes; acp-bash runs scripts of at most {} bytes \
                     (start it with a larger --max-prompt-bytes to allow more)",
                    text.len(),
                    self.max_prompt_bytes
                ),
                json!({ "promptBytes": text.len(), "maxPromptBytes": self.max_prompt_bytes }),
            ));
        }
        if let Some(command) = crate::driver::commands::parse(&text) {
            return self.slash_command(command, request.session_id, state, responder, cx);
        }
        // It runs in the session's cwd as the turn finds it (an earlier turn may still `cd`).
        let call = match call_from_prompt(&text, None) {
            Ok(call) => call,
            Err(nothing_to_run) => {
                // Not an error: the user gets told what to type, and the turn ends.
                let hint = bridge::agent_message(&nothing_to_run.to_string());
                ConnectionSink::new(cx, request.session_id).send(hint);
                return responder.respond(PromptResponse::new(StopReason::EndTurn));
            }
        };
        let token = CancellationToken::new();
        let turn = state.next_turn.fetch_add(1, Ordering::Relaxed);
        state.running.lock().unwrap().insert(turn, token.clone());
        let task_cx = cx.clone();
        // `$/cancel_request` for this prompt (JSON-RPC's own cancel) stops it like session/cancel.
        let rpc_cancel = responder.cancellation();
        cx.spawn(async move {
            let running = self.run_turn(&task_cx, &request.session_id, &state, &text, call, &token);
            tokio::pin!(running);
            let stop = tokio::select! {
                stop = &mut running => stop,
                () = rpc_cancel.cancelled() => {
                    tracing::info!(session = %request.session_id.0, "$/cancel_request for a prompt");
                    token.cancel();
                    running.await
                }
            };
            state.running.lock().unwrap().remove(&turn);
            // Never return Err from a connection task: it would tear the connection down.
            if let Err(error) = responder.respond_with_result(stop.map(PromptResponse::new)) {
                tracing::debug!(%error, "could not answer session/prompt");
            }
            Ok(())
        })
    }

    /// A slash command's turn: its answer is an agent message, and the turn ends with
    /// `end_turn` (bad arguments included: the message says what is wrong). A job started by
    /// `/bg` gets its tool call now and keeps streaming to it after the turn.
    fn slash_command(
        self: Arc<Self>,
        command: Result<SlashCommand, String>,
        session_id: SessionId,
        state: Arc<SessionState>,
        responder: Responder<PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let task_cx = cx.clone();
        cx.spawn(async move {
            let card = {
                let _turn = state.turn.lock().await;
                let turn = CommandTurn {
                    cx: &task_cx,
                    session_id: &session_id,
                    session: &state.session,
                    jobs: &state.jobs,
                    log: &state.log,
                    features: *self.features.lock().unwrap(),
                    new_call_id: &|| state.new_call_id(),
                };
                match command {
                    Ok(command) => turn.run(command).await,
                    Err(message) => {
                        turn.say(message);
                        None
                    }
                }
            };
            if let Err(error) = responder.respond(PromptResponse::new(StopReason::EndTurn)) {
                tracing::debug!(%error, "could not answer session/prompt");
            }
            if let Some(card) = card {
                card.spawn(&self.runs, self.limits);
            }
            Ok(())
        })
    }

    async fn run_turn(
        &self,
        cx: &ConnectionTo<Client>,
        session_id: &SessionId,
        state: &SessionState,
        prompt: &str,
        call: BashCall,
        token: &CancellationToken,
    ) -> agent_client_protocol::Result<StopReason> {
        let _turn = state.turn.lock().await;
        if token.is_cancelled() {
            return Ok(StopReason::Cancelled);
        }
        let runner = ToolCallRunner::new(*self.features.lock().unwrap()).limits(self.limits);
        let call_id = ToolCallId::new(format!(
            "call-{}-{}",
            state.number,
            state.next_call.fetch_add(1, Ordering::Relaxed)
        ));
        let title = lifecycle::call_started(state, prompt, &call_id, &call);
        // The call runs on a tracked tokio task, so that shutdown can wait for the kill.
        let run = {
            let session = state.session.clone();
            let mut connection = ConnectionSink::new(cx.clone(), session_id.clone());
            let behind = self.client_behind.clone();
            // While the client is behind on reading, live output is dropped here, before the SDK
            // even serializes it; everything else (the final update above all) always goes.
            let mut sink = move |update: SessionUpdate| {
                if !(behind.is_behind() && is_live_output(&update)) {
                    connection.send(update);
                }
            };
            let token = token.clone();
            let call_id = call_id.clone();
            self.runs.spawn(async move {
                runner
                    .run(&session, &call_id, &call, &mut sink, &token)
                    .await
            })
        };
        let result = match run.await {
            Ok(result) => result,
            Err(error) => {
                tracing::error!(%error, "the command's task failed");
                let console =
                    console_block(&format!("acp-bash could not run the command: {error}"));
                let view = present_call(&BashCall::new(""), &state.session.cwd());
                let update = bridge::final_update(
                    &call_id,
                    &view,
                    &ResultView::Text { console },
                    runner.features,
                );
                ConnectionSink::new(cx.clone(), session_id.clone())
                    .send(SessionUpdate::ToolCallUpdate(update));
                return Err(Error::internal_error().data(error.to_string()));
            }
        };
        let mut sink = ConnectionSink::new(cx.clone(), session_id.clone());
        lifecycle::call_finished(state, &call_id, &result, title, &mut sink);
        Ok(if token.is_cancelled() {
            StopReason::Cancelled
        } else {
            StopReason::EndTurn
        })
    }

    fn cancel(&self, session_id: &SessionId) {
        match self.sessions.lock().unwrap().get(session_id) {
            Some(state) => {
                tracing::info!(session = %session_id.0, "session/cancel");
                state.cancel_all();
            }
            None => {
                tracing::info!(session = %session_id.0, "session/cancel for an unknown session")
            }
        }
    }

    /// After EOF: cancel every command, kill every job, and wait (bounded) for the engine to
    /// kill them.
    async fn shutdown(&self) {
        let mut registries = Vec::new();
        for state in self.sessions.lock().unwrap().values() {
            state.cancel_all();
            // The jobs die with the agent: their records say so (a replay shows it).
            state.log.agent_ending();
            state.jobs.registry.kill_all();
            registries.push(state.jobs.registry.clone());
        }
        self.runs.close();
        let jobs = futures::future::join_all(registries.iter().map(JobRegistry::shutdown));
        if tokio::time::timeout(SHUTDOWN_WAIT, async {
            tokio::join!(self.runs.wait(), jobs)
        })
        .await
        .is_err()
        {
            tracing::warn!(
                "some commands were still running {SHUTDOWN_WAIT:?} after the client left"
            );
        }
    }
}

/// Whether `update` only carries live output (`_meta.terminal_output` and nothing else).
fn is_live_output(update: &SessionUpdate) -> bool {
    let SessionUpdate::ToolCallUpdate(update) = update else {
        return false;
    };
    let card_output = update.fields == ToolCallUpdateFields::default()
        && update
            .meta
            .as_ref()
            .is_some_and(|meta| meta.len() == 1 && meta.contains_key("terminal_output"));
    // A console view for clients without the card: content only, no status; the next view or
    // the final update replaces it.
    let console_view = update.meta.is_none() && update.fields.content.is_some() && {
        let mut rest = update.fields.clone();
        rest.content = None;
        rest == ToolCallUpdateFields::default()
    };
    card_output || console_view
}

/// Whether the connection ended because the client closed the agent's stdout (a write failed
/// with EPIPE): the client went away, exactly as with EOF on stdin, and that is not a failure.
fn client_closed_its_end(error: &Error) -> bool {
    let broken_pipe = format!("(os error {})", libc::EPIPE);
    let mentions = |value: &serde_json::Value| value.to_string().contains(&broken_pipe);
    error.message.contains(&broken_pipe) || error.data.as_ref().is_some_and(mentions)
}

/// The text of a prompt: its text blocks (and embedded text resources) joined by newlines.
/// Images, audio and links carry no script and are ignored.
pub fn prompt_text(blocks: &[ContentBlock]) -> String {
    let mut parts = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.as_str()),
            ContentBlock::Resource(resource) => {
                if let EmbeddedResourceResource::TextResourceContents(text) = &resource.resource {
                    parts.push(text.text.as_str());
                }
            }
            _ => {}
        }
    }
    parts.join("\n")
}
