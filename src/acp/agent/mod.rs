//! The ACP agent: its face ([`AcpBashAgent`]), the routing of requests to handlers, and the
//! per-connection state.
//!
//! Owns: the builder and `serve`, `initialize` (remembering what the client renders, advertising
//! the driver's auth methods), `authenticate`, `session/new` (one engine session per ACP session,
//! each with its own working directory), `session/set_mode` (announced as a
//! `config_option_update`), `session/cancel` (cancels the
//! session's turns at once), and shutdown on stdin EOF (every running command is cancelled before
//! [`AcpBashAgent::serve`] returns). The rest lives beside it: `turn` (`session/prompt`: a turn
//! of the driver, on the wire), `session` (session state and ids), `config` (the config
//! options and `session/set_config_option`), `lifecycle` (list, load,
//! resume, close, delete), `errors`. Must not touch: what a prompt means (the driver's,
//! [`crate::driver`]), how a call looks on the wire ([`super::bridge`]), how commands run.
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
    AuthMethod as AcpAuthMethod, AuthMethodAgent, AuthMethodTerminal, AuthenticateRequest,
    AuthenticateResponse, CancelNotification, CloseSessionRequest, DeleteSessionRequest,
    Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest, LoadSessionRequest,
    NewSessionRequest, NewSessionResponse, PromptRequest, ResumeSessionRequest, SessionId,
    SetSessionConfigOptionRequest, SetSessionModeRequest, SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, Error};
use serde_json::json;
use tokio_util::task::TaskTracker;

use super::bridge::ClientFeatures;
use super::commands as slash;
use super::modes::{ModeChoice, SandboxModes};
use super::transport::ClientBehind;
use crate::driver::{AuthMethod, Driver, ShellDriver};
use crate::exec::Engine;
use crate::jobs::{JobLimits, JobRegistry};
use crate::present::stream::StreamLimits;
use crate::sandbox;
use crate::store::{SessionRecord, Store};
use errors::{client_closed_its_end, invalid_params, short, unknown_session};
use session::{random_session_id, SessionState};

mod config;
mod errors;
mod lifecycle;
mod mcp;
mod session;
mod turn;
mod v2face;

pub use config::{MODEL_OPTION_ID, MODE_OPTION_ID};
pub use turn::{prompt_of, prompt_text};

/// How long [`AcpBashAgent::serve`] waits, after the client went away, for cancelled commands to
/// be killed and reaped before it returns anyway.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// The largest prompt (its script text) the agent runs unless told otherwise: 1 MiB.
pub const DEFAULT_MAX_PROMPT_BYTES: usize = 1 << 20;

/// The room an input line has for a prompt's images beyond its text when the driver takes
/// images (16 MiB of base64: past the 5 MiB a model driver sends of one prompt, so that a
/// prompt with more is answered by naming the images not sent, not refused whole).
pub const PROMPT_IMAGE_LINE_BYTES: usize = 16 << 20;

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
    driver: Arc<dyn Driver>,
    mcp_timeout: Duration,
    permits: crate::permit::Permits,
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
            driver: Arc::new(ShellDriver::default()),
            mcp_timeout: crate::mcp::DEFAULT_TIMEOUT,
            permits: crate::permit::Permits::default(),
        }
    }

    /// Asks the client (`session/request_permission`) when the sandbox refuses a command
    /// something the user may allow, and keeps what the user allowed always where `permits`
    /// says ([`crate::permit`]). Off by default for the library; the binary turns it on
    /// unless `--no-permission-requests`.
    pub fn with_permission_requests(mut self, permits: crate::permit::Permits) -> Self {
        self.permits = permits;
        self
    }

    /// Bounds an MCP server's start and each call of its tools (default
    /// [`crate::mcp::DEFAULT_TIMEOUT`]).
    pub fn with_mcp_timeout(mut self, timeout: Duration) -> Self {
        self.mcp_timeout = timeout;
        self
    }

    /// Makes every turn with `driver` instead of the [`ShellDriver`] (the prompt is the
    /// script): a model driver, say. Nothing else about the agent changes: calls, cards, jobs,
    /// sessions and their records work the same for every driver.
    pub fn with_driver(mut self, driver: Arc<dyn Driver>) -> Self {
        self.driver = driver;
        self
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
        connection.driver = self.driver;
        connection.max_prompt_bytes = self.max_prompt_bytes;
        connection.client_behind = self.client_behind;
        connection.mcp_timeout = self.mcp_timeout;
        connection.permits = self.permits;
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
    /// Makes the turns.
    driver: Arc<dyn Driver>,
    /// The bound on an MCP server's start and on each call of its tools.
    mcp_timeout: Duration,
    /// Whether to ask when the sandbox refuses a command, and where "always" is kept.
    permits: crate::permit::Permits,
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
            driver: Arc::new(ShellDriver::default()),
            mcp_timeout: crate::mcp::DEFAULT_TIMEOUT,
            permits: crate::permit::Permits::default(),
        }
    }

    /// Routes every request and notification of the connection to its handler.
    async fn handle(
        self: Arc<Self>,
        transport: impl ConnectTo<Agent>,
    ) -> agent_client_protocol::Result<()> {
        /// Registers `Connection::$method` for requests of type `$request`.
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
        let builder = Agent.v1().name("acp-bash");
        let builder = route!(builder, ListSessionsRequest => list);
        let builder = route!(builder, LoadSessionRequest => load);
        let builder = route!(builder, ResumeSessionRequest => resume);
        let builder = route!(builder, CloseSessionRequest => close);
        let builder = route!(builder, DeleteSessionRequest => delete);
        let builder = route!(builder, InitializeRequest => initialize);
        let builder = route!(builder, AuthenticateRequest => authenticate);
        let builder = route!(builder, NewSessionRequest => new_session);
        let builder = route!(builder, PromptRequest => prompt);
        let builder = route!(builder, SetSessionModeRequest => set_mode);
        let builder = route!(builder, SetSessionConfigOptionRequest => set_config_option);
        let on_cancel = self.clone();
        let v1 = builder.on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                on_cancel.cancel(&notification.session_id);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        );
        // `initialize` picks the face: protocol version 2 (or newer) gets the v2 face,
        // everything else the v1 face, unchanged (the SDK's router hands it the first message
        // as it came).
        Agent
            .protocol_router()
            .with_v1(v1)
            .with_v2(LazyV2Face(self.clone()))
            .connect_to(transport)
            .await
    }

    fn initialize(
        &self,
        request: InitializeRequest,
        responder: Responder<InitializeResponse>,
        _cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let features = ClientFeatures::from_capabilities(&request.client_capabilities);
        tracing::info!(
            card = features.terminal_output,
            terminal = features.terminal,
            "initialize"
        );
        *self.features.lock().unwrap() = features;
        let answered = responder.respond(initialize_response(
            &request,
            self.store.is_some(),
            &*self.driver,
        ));
        // The scrub and the sandbox probe take milliseconds: do them now that the client has
        // its answer, before the first session or command needs them. `respond` only queued the
        // answer; the transport writes it on the tasks' next turn, so the preparation thread
        // (a clone, a stack, then milliseconds of CPU) starts after that turn, not before the
        // write (`notes/2026-12-02-start-up.md`).
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let engine = self.engine.clone();
                runtime.spawn(async move {
                    tokio::task::yield_now().await;
                    engine.prepare_in_background();
                });
            }
            Err(_) => self.engine.prepare_in_background(),
        }
        answered
    }

    /// `authenticate`: the driver checks the method (the shell driver advertises none).
    fn authenticate(
        &self,
        request: AuthenticateRequest,
        responder: Responder<AuthenticateResponse>,
        _cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        match self.driver.authenticate(&request.method_id.0) {
            Ok(()) => responder.respond(AuthenticateResponse::new()),
            Err(error) => responder.respond_with_error(invalid_params(
                error.to_string(),
                json!({ "methodId": short(&request.method_id.0) }),
            )),
        }
    }

    fn new_session(
        self: Arc<Self>,
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
        let state = self.open(id.clone(), number, session, record);
        self.start_mcp(&state, &request.mcp_servers);
        let answer = move |this: &Connection, cx: &ConnectionTo<Client>| {
            responder.respond(
                NewSessionResponse::new(id.clone())
                    .modes(modes)
                    .config_options(this.config_options(&state)),
            )?;
            // After the answer, so that the client knows the session the commands are for.
            cx.send_notification(agent_client_protocol::v1::schema::SessionNotification::new(
                id,
                slash::available_commands(),
            ))
        };
        match self.driver.session_opening() {
            None => answer(&self, &cx),
            // The models the session may choose come from a provider's list: answer once it
            // is known (or failed; bounded by the driver).
            Some(known) => {
                let spawner = cx.clone();
                spawner.spawn(async move {
                    known.await;
                    answer(&self, &cx)
                })
            }
        }
    }
    /// `session/set_mode`: the sandbox mode for the session's next commands.
    fn set_mode(
        &self,
        request: SetSessionModeRequest,
        responder: Responder<SetSessionModeResponse>,
        cx: ConnectionTo<Client>,
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
        let was = state.session.mode();
        state.session.set_mode(mode);
        state.log.set_mode(mode.id());
        self.restart_mcp_if_mode_changed(&state, was);
        // Before the answer, so that its place on the wire is fixed (like `current_mode_update`
        // for `set_config_option`).
        self.announce_config_options(&cx, request.session_id, &state)?;
        responder.respond(SetSessionModeResponse::new())
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
            // The session's MCP servers end with the agent.
            *state.mcp.lock().unwrap() = Arc::new(crate::mcp::McpServers::none());
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
        // Each record is written whole, its journal folded in.
        for state in self.sessions.lock().unwrap().values() {
            state.log.compact();
        }
    }
}

/// The v2 face of a connection, built only once the router hands it a v2 client: a v1 client
/// (every editor today) never pays for its handlers (`notes/2026-12-02-start-up-rss.md`).
struct LazyV2Face(Arc<Connection>);

impl ConnectTo<Client> for LazyV2Face {
    async fn connect_to(self, client: impl ConnectTo<Agent>) -> agent_client_protocol::Result<()> {
        self.0.v2_face().connect_to(client).await
    }
}

/// The answer to `request`: the protocol version it asked for (the v1 face gets only version 1
/// or what falls back to it), the capabilities of an agent with or without a store, the
/// driver's auth methods and the agent's name and version.
fn initialize_response(
    request: &InitializeRequest,
    has_store: bool,
    driver: &dyn Driver,
) -> InitializeResponse {
    InitializeResponse::new(request.protocol_version)
        .agent_capabilities(lifecycle::capabilities(has_store, driver))
        .auth_methods(
            driver
                .auth_methods()
                .iter()
                .map(|method| acp_auth_method(method, request.client_capabilities.auth.terminal))
                .collect(),
        )
        .agent_info(Implementation::new("acp-bash", env!("CARGO_PKG_VERSION")).title("acp-bash"))
}

/// A driver's auth method as `initialize` advertises it. A terminal method goes out as one
/// (`type: terminal`) only to a client that enabled `auth.terminal` (the schema's rule); to
/// another it is an agent method whose `_meta["terminal-auth"]` names the command to run in a
/// terminal (this program, with the method's arguments: the form Zed reads).
fn acp_auth_method(method: &AuthMethod, client_runs_terminal_auth: bool) -> AcpAuthMethod {
    match &method.terminal_args {
        Some(args) if client_runs_terminal_auth => AcpAuthMethod::Terminal(
            AuthMethodTerminal::new(method.id.clone(), method.name.clone())
                .description(method.description.clone())
                .args(args.clone()),
        ),
        Some(args) => {
            let command = std::env::current_exe()
                .map(|exe| exe.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "acp-bash".into());
            let label = format!("acp-bash {}", args.join(" "));
            let meta = json!({
                "terminal-auth": { "command": command, "args": args, "label": label }
            });
            AcpAuthMethod::Agent(
                AuthMethodAgent::new(method.id.clone(), method.name.clone())
                    .description(method.description.clone())
                    .meta(meta.as_object().cloned()),
            )
        }
        None => AcpAuthMethod::Agent(
            AuthMethodAgent::new(method.id.clone(), method.name.clone())
                .description(method.description.clone()),
        ),
    }
}
