//! The agent's session state: one entry per active ACP session, and the ids it mints.
//!
//! Owns: [`SessionState`] (the engine session, its record, the running turns' tokens, its
//! jobs), opening a session on the connection, session ids (random, never repeating across
//! processes) and call ids (`call-SESSION-N`, continuing after a restored record's). Must not
//! touch: what a turn does (the turn layer), the wire.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{SessionId, ToolCallId};
use agent_client_protocol::Error;
use tokio_util::sync::CancellationToken;

use super::Connection;
use crate::acp::commands::SessionJobs;
use crate::exec::Session;
use crate::jobs::JobRegistry;
use crate::store::{SessionLog, SessionRecord};

/// One ACP session: an engine session plus the calls it is running.
pub(super) struct SessionState {
    pub number: u64,
    pub session: Session,
    /// The session's record, written to the store as it changes (shared with its jobs' cards,
    /// which record how each job ended).
    pub log: Arc<SessionLog>,
    /// The id of the call running now, if any.
    pub current_call: Mutex<Option<String>>,
    next_call: AtomicU64,
    /// Held for a whole turn: a session's prompts run one after another.
    pub turn: tokio::sync::Mutex<()>,
    /// The tokens of the turns that are running or waiting for `turn`, by turn number.
    pub running: Mutex<HashMap<u64, CancellationToken>>,
    pub next_turn: AtomicU64,
    /// The session's background jobs (`/bg`): killed when the session or the connection ends.
    pub jobs: SessionJobs,
    /// The model the session chose by `session/set_config_option` (an id of the driver's
    /// `models()`); `None`: the driver's default. Kept in the record: a loaded or resumed
    /// session goes on with it while the agent still offers it.
    pub model: Mutex<Option<String>>,
    /// The reasoning level the session chose (an id of the driver's `thought_levels()`);
    /// `None`: the driver's default. Kept in the record: a loaded or resumed session goes on
    /// with it while the agent still offers it.
    pub thought_level: Mutex<Option<String>>,
    /// The ACP v2 face: the turn calls running now, by terminal id (the call id), each with
    /// its own token (a child of its turn's), which `terminal/cancel` fires.
    pub v2_calls: Mutex<HashMap<String, CancellationToken>>,
    /// The ACP v2 face: whether foreground work (a turn) is running, so that a job's end
    /// repeats the right state (`running` or `idle`) with the new `background` list.
    pub v2_foreground: std::sync::atomic::AtomicBool,
    /// The MCP servers the client gave the session (replaced by `session/load` and
    /// `session/resume`; ended with the session).
    pub mcp: Mutex<Arc<crate::mcp::McpServers>>,
    /// What the session's user allowed when asked, and whether to ask
    /// (`notes/2026-12-06-permission-requests.md`).
    pub permits: crate::permit::SessionPermits,
}

impl SessionState {
    /// The id of the session's next tool call: `call-SESSION-N`, unique on the connection.
    pub fn new_call_id(&self) -> ToolCallId {
        let n = self.next_call.fetch_add(1, Ordering::Relaxed);
        ToolCallId::new(format!("call-{}-{n}", self.number))
    }

    pub fn cancel_all(&self) {
        for token in self.running.lock().unwrap().values() {
            token.cancel();
        }
    }
}

impl Connection {
    /// Makes `session` (with its `record`) an active session of this connection.
    pub(super) fn open(
        &self,
        id: SessionId,
        number: u64,
        session: Session,
        record: SessionRecord,
    ) -> Arc<SessionState> {
        // Its namespaces and view, built while the client sends its first prompt
        // (`notes/2026-12-02-zygote-first-command.md`); each mode it changes to as well.
        session.prepare_sandbox();
        let state = Arc::new(SessionState {
            number,
            // Call ids continue after every call and job the session ever made, so a replayed
            // call and a new one never share an id.
            next_call: AtomicU64::new(record.calls_and_jobs() + 1),
            model: Mutex::new(record.model.clone()),
            thought_level: Mutex::new(record.thought_level.clone()),
            log: Arc::new(SessionLog::new(self.store.clone(), record)),
            current_call: Mutex::new(None),
            turn: tokio::sync::Mutex::new(()),
            running: Mutex::new(HashMap::new()),
            next_turn: AtomicU64::new(1),
            jobs: SessionJobs::new(JobRegistry::new(self.job_limits)),
            v2_calls: Mutex::new(HashMap::new()),
            v2_foreground: std::sync::atomic::AtomicBool::new(false),
            mcp: Mutex::new(Arc::new(crate::mcp::McpServers::none())),
            permits: self.permits.session(&session),
            session,
        });
        self.sessions.lock().unwrap().insert(id, state.clone());
        state
    }

    /// Whoever started the agent chose `--sandbox off`: only then may a session choose it.
    pub(super) fn off_allowed(&self) -> bool {
        self.engine.config().sandbox_mode == crate::sandbox::Mode::Off
    }

    /// The session `id` names, or the error that says it is unknown.
    pub(super) fn session_state(&self, id: &SessionId) -> Result<Arc<SessionState>, Error> {
        let state = self.sessions.lock().unwrap().get(id).cloned();
        state.ok_or_else(|| self.inactive_session(id))
    }
}

/// A new session id: 128 random bits from the operating system, so that ids never repeat across
/// processes (clients such as acpx key their records by it).
pub(super) fn random_session_id() -> SessionId {
    let mut bytes = [0u8; 16];
    crate::random::random_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    SessionId::new(format!("sess-{hex}"))
}
