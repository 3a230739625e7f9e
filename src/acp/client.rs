//! A small ACP client that drives an agent binary over real pipes: used by `acp-bash demo`,
//! `acp-bash run` and the integration tests.
//!
//! Owns: spawning the agent ([`agent_client_protocol::AcpAgent`]), `initialize` with one of a few
//! client [`ClientProfile`]s, sessions, prompts (collecting their updates), cancel, and the
//! [`Transcript`] of every JSON-RPC line exchanged. Must not touch: the agent's internals; it only
//! sees the wire, like any editor.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, Implementation, InitializeRequest, InitializeResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, PromptRequest, PromptResponse,
    SessionId, SessionNotification, SessionUpdate, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, SentRequest};
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent, Client, LineDirection};
use serde_json::json;
use tokio::sync::mpsc;

/// Which editor the client pretends to be: it decides the `initialize` capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientProfile {
    /// Zed's exact capabilities, `_meta.terminal_output` included: the terminal card path.
    Zed,
    /// A client that advertises nothing: the console fallback path.
    Plain,
    /// A client with only `terminal: true` (it could run `terminal/create` itself): still the
    /// console fallback, since only `_meta.terminal_output` turns the card on.
    TerminalOnly,
    /// A client that shows context compactions (`session.compaction`, schema 1.17) and
    /// advertises nothing else.
    Compaction,
}

impl ClientProfile {
    /// The `clientCapabilities` sent in `initialize`.
    pub fn capabilities(self) -> ClientCapabilities {
        let value = match self {
            ClientProfile::Zed => json!({
                "fs": {"readTextFile": true, "writeTextFile": true},
                "terminal": true,
                "auth": {"terminal": true},
                "_meta": {"terminal_output": true, "terminal-auth": true}
            }),
            ClientProfile::Plain => json!({}),
            ClientProfile::TerminalOnly => json!({"terminal": true}),
            ClientProfile::Compaction => json!({"session": {"compaction": {}}}),
        };
        serde_json::from_value(value).expect("client capabilities are valid")
    }

    /// The `clientInfo` sent in `initialize`.
    pub fn client_info(self) -> Implementation {
        match self {
            ClientProfile::Zed => Implementation::new("zed", "0.215.0"),
            ClientProfile::Plain => Implementation::new("plain-client", "1.0.0"),
            ClientProfile::TerminalOnly => Implementation::new("terminal-client", "1.0.0"),
            ClientProfile::Compaction => Implementation::new("compaction-client", "1.0.0"),
        }
    }
}

/// Every line that crossed the agent's stdio, in order: `-> {json}` from client to agent,
/// `<- {json}` from agent to client. The agent's stderr is kept apart.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct Transcript {
    lines: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Transcript {
    /// The JSON-RPC lines so far, each prefixed with `-> ` or `<- `.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The agent's stderr lines so far (its logs).
    pub fn stderr(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    fn record(&self, line: &str, direction: LineDirection) {
        match direction {
            LineDirection::Stdin => self.lines.lock().unwrap().push(format!("-> {line}")),
            LineDirection::Stdout => self.lines.lock().unwrap().push(format!("<- {line}")),
            LineDirection::Stderr => self.stderr.lock().unwrap().push(line.to_string()),
        }
    }
}

type LineHook = Arc<dyn Fn(&str, LineDirection) + Send + Sync>;

/// Spawns an agent binary and talks ACP to it. Build it, then [`AcpClient::run`] a conversation.
#[non_exhaustive]
pub struct AcpClient {
    config: AcpAgentConfig,
    profile: ClientProfile,
    /// Also asks for acp-bash's notices apart (`_meta.acp_bash_notices`).
    notices_apart: bool,
    transcript: Transcript,
    hook: Option<LineHook>,
}

impl AcpClient {
    /// A client for the agent started as `program args…`.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        AcpClient {
            config: AcpAgentConfig::new(program.into()).args(args.into_iter().map(Into::into)),
            profile: ClientProfile::Plain,
            notices_apart: false,
            transcript: Transcript::default(),
            hook: None,
        }
    }

    /// Sets what the client advertises in `initialize` (the default is a plain client).
    pub fn profile(mut self, profile: ClientProfile) -> Self {
        self.profile = profile;
        self
    }

    /// Also advertises `_meta.acp_bash_notices`: the agent sends its notices about a run on the
    /// card as updates of their own ([`crate::acp::summary::CallSummary::notices`]), not among
    /// the output (what `acp-bash run` asks, to print them on stderr).
    pub fn notices_apart(mut self) -> Self {
        self.notices_apart = true;
        self
    }

    /// Sets an environment variable for the agent process.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.config = self.config.env(name, value);
        self
    }

    /// Also calls `hook` with every line as it crosses (for printing a live transcript).
    pub fn on_line(mut self, hook: impl Fn(&str, LineDirection) + Send + Sync + 'static) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// The transcript this client records (shared: it fills while the conversation runs).
    pub fn transcript(&self) -> Transcript {
        self.transcript.clone()
    }

    /// Spawns the agent, sends `initialize`, runs `conversation`, then closes the agent's stdin
    /// and waits for it to exit.
    pub async fn run<R>(
        self,
        conversation: impl AsyncFnOnce(Conversation) -> agent_client_protocol::Result<R>,
    ) -> agent_client_protocol::Result<R> {
        let transcript = self.transcript.clone();
        let hook = self.hook.clone();
        let capabilities = self.capabilities();
        let agent = AcpAgent::new(self.config).with_debug(move |line, direction| {
            transcript.record(line, direction);
            if let Some(hook) = &hook {
                hook(line, direction);
            }
        });
        Self::converse(agent, capabilities, self.profile, conversation).await
    }

    /// Like [`AcpClient::run`], over `agent`: a transport to an agent served elsewhere (an
    /// [`crate::acp::AcpBashAgent`] in this process over a socket pair, say) instead of the program.
    /// Nothing is recorded in the transcript (no line crosses a pipe).
    pub async fn run_over<R>(
        self,
        agent: impl agent_client_protocol::ConnectTo<Client> + 'static,
        conversation: impl AsyncFnOnce(Conversation) -> agent_client_protocol::Result<R>,
    ) -> agent_client_protocol::Result<R> {
        Self::converse(agent, self.capabilities(), self.profile, conversation).await
    }

    /// The profile's capabilities, with `_meta.acp_bash_notices` when asked.
    fn capabilities(&self) -> ClientCapabilities {
        let mut capabilities = self.profile.capabilities();
        if self.notices_apart {
            let mut meta = capabilities.meta.take().unwrap_or_default();
            meta.insert(
                crate::acp::bridge::NOTICES_APART.to_string(),
                serde_json::Value::Bool(true),
            );
            capabilities.meta = Some(meta);
        }
        capabilities
    }

    async fn converse<R>(
        agent: impl agent_client_protocol::ConnectTo<Client> + 'static,
        capabilities: ClientCapabilities,
        profile: ClientProfile,
        conversation: impl AsyncFnOnce(Conversation) -> agent_client_protocol::Result<R>,
    ) -> agent_client_protocol::Result<R> {
        let (updates_tx, updates) = mpsc::unbounded_channel::<SessionNotification>();
        Client
            .v1()
            .name("acp-bash-client")
            .on_receive_notification(
                async move |notification: SessionNotification, _cx| {
                    let _ = updates_tx.send(notification);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(agent, async move |cx| {
                let init = cx
                    .send_request(
                        InitializeRequest::new(ProtocolVersion::V1)
                            .client_capabilities(capabilities)
                            .client_info(profile.client_info()),
                    )
                    .block_task()
                    .await?;
                conversation(Conversation {
                    cx,
                    updates,
                    backlog: VecDeque::new(),
                    init,
                })
                .await
            })
            .await
    }
}

/// What a prompt produced. Made by the client; callers only read it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Turn {
    /// How the turn ended.
    pub stop_reason: StopReason,
    /// The session's updates sent during the turn, in order.
    pub updates: Vec<SessionUpdate>,
}

/// An initialized connection to the agent.
#[non_exhaustive]
pub struct Conversation {
    cx: ConnectionTo<Agent>,
    updates: mpsc::UnboundedReceiver<SessionNotification>,
    /// Updates of other sessions that arrived while a prompt was collecting its own.
    backlog: VecDeque<SessionNotification>,
    /// The agent's answer to `initialize`.
    pub init: InitializeResponse,
}

impl Conversation {
    /// The raw connection, for requests this type has no helper for.
    pub fn connection(&self) -> &ConnectionTo<Agent> {
        &self.cx
    }

    /// `session/new` in `cwd`. With acp-bash (by its `agentInfo.name`), returns once the agent
    /// has also advertised the session's slash commands (it sends `available_commands_update`
    /// right after its answer), so that what the conversation does next always crosses the pipes
    /// after it; the update is kept for [`Self::next_update`]. Other agents may send none.
    pub async fn new_session(&mut self, cwd: &Path) -> agent_client_protocol::Result<SessionId> {
        self.new_session_with(NewSessionRequest::new(cwd)).await
    }

    /// Like [`Self::new_session`], for the whole `request` (with its `mcpServers`, say).
    pub async fn new_session_with(
        &mut self,
        request: NewSessionRequest,
    ) -> agent_client_protocol::Result<SessionId> {
        let session = self.cx.send_request(request).block_task().await?.session_id;
        let acp_bash = self
            .init
            .agent_info
            .as_ref()
            .is_some_and(|info| info.name == "acp-bash");
        if acp_bash {
            while let Some(notification) = self.updates.recv().await {
                let advertised = notification.session_id == session
                    && matches!(
                        notification.update,
                        SessionUpdate::AvailableCommandsUpdate(_)
                    );
                self.backlog.push_back(notification);
                if advertised {
                    break;
                }
            }
        }
        Ok(session)
    }

    /// Sends a prompt without waiting for it; collect its updates with [`Self::next_update`].
    pub fn start_prompt(&self, session: &SessionId, text: &str) -> SentRequest<PromptResponse> {
        self.cx
            .send_request(PromptRequest::new(session.clone(), vec![text.into()]))
    }

    /// The next update of any session (waits for one; `None` once the connection is gone).
    pub async fn next_update(&mut self) -> Option<SessionNotification> {
        match self.backlog.pop_front() {
            Some(update) => Some(update),
            None => self.updates.recv().await,
        }
    }

    /// `session/load` of `session` in `cwd`: the answer and the session's updates the agent
    /// replayed before it.
    pub async fn load_session(
        &mut self,
        session: &SessionId,
        cwd: &Path,
    ) -> agent_client_protocol::Result<(LoadSessionResponse, Vec<SessionUpdate>)> {
        let response = self
            .cx
            .send_request(LoadSessionRequest::new(session.clone(), cwd))
            .block_task()
            .await;
        // Every update sent before the answer has been handled by now (the SDK keeps order).
        let mut replayed = Vec::new();
        while let Ok(notification) = self.updates.try_recv() {
            if &notification.session_id == session {
                replayed.push(notification.update);
            } else {
                self.backlog.push_back(notification);
            }
        }
        Ok((response?, replayed))
    }

    /// `session/cancel`.
    pub fn cancel(&self, session: &SessionId) -> agent_client_protocol::Result<()> {
        self.cx
            .send_notification(CancelNotification::new(session.clone()))
    }

    /// Sends a prompt and waits for its answer, collecting the session's updates.
    pub async fn prompt(
        &mut self,
        session: &SessionId,
        text: &str,
    ) -> agent_client_protocol::Result<Turn> {
        self.prompt_with(session, text, |_| {}).await
    }

    /// Like [`Self::prompt`], calling `on_update` with each of the session's updates as it arrives.
    pub async fn prompt_with(
        &mut self,
        session: &SessionId,
        text: &str,
        mut on_update: impl FnMut(&SessionUpdate),
    ) -> agent_client_protocol::Result<Turn> {
        let response = self.start_prompt(session, text).block_task();
        tokio::pin!(response);
        let mut updates = Vec::new();
        let mut keep = |notification: SessionNotification,
                        backlog: &mut VecDeque<SessionNotification>| {
            if &notification.session_id == session {
                on_update(&notification.update);
                updates.push(notification.update);
            } else {
                backlog.push_back(notification);
            }
        };
        let response = loop {
            tokio::select! {
                biased;
                notification = self.updates.recv() => match notification {
                    Some(notification) => keep(notification, &mut self.backlog),
                    None => break response.await,
                },
                response = &mut response => break response,
            }
        };
        // Every update sent before the answer has been handled by now (the SDK keeps order).
        while let Ok(notification) = self.updates.try_recv() {
            keep(notification, &mut self.backlog);
        }
        Ok(Turn {
            stop_reason: response?.stop_reason,
            updates,
        })
    }
}
