//! Sessions beyond `session/new`: `session/list`, `session/load`, `session/resume`,
//! `session/close` and `session/delete`, and the capabilities that advertise them.
//!
//! Owns: restoring a stored session (its directory, the one a `cd` left included, and its mode;
//! what cannot be restored is said in an agent message), the replay on load (built by
//! [`crate::acp::replay`] from the record), closing (the running command is killed, the
//! session's jobs are ended, its memory freed, its record kept). Must not touch: the record's
//! shape or files (`crate::store`), how calls look on the wire (the bridge).
//!
//! Concurrency as in the rest of the agent: handlers never await a later inbound message;
//! what waits (a listing that reads every record, a close that waits for the kill) runs as a
//! connection task.

use agent_client_protocol::v1::schema::{
    AgentCapabilities, CloseSessionResponse, ContentChunk, DeleteSessionResponse,
    ListSessionsResponse, LoadSessionResponse, PromptCapabilities, ResumeSessionResponse,
    SessionCapabilities, SessionCloseCapabilities, SessionDeleteCapabilities, SessionInfo,
    SessionListCapabilities, SessionNotification, SessionResumeCapabilities, SessionUpdate,
};
use agent_client_protocol::ErrorCode;

use super::*;
use crate::acp::replay::replay;
use crate::store::{iso8601, ListQuery, StoreError};

/// Sessions per `session/list` page.
pub(crate) const LIST_PAGE_SIZE: usize = 50;

fn no_history(method: &str) -> Error {
    Error::method_not_found().data(json!(format!(
        "{method}: this agent runs with --no-history, so it keeps no sessions to list, load, \
         resume or delete"
    )))
}

fn agent_text(text: String) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(text.into()))
}

/// What `initialize` advertises: the whole session lifecycle with a store, only
/// `session/close` without one (`--no-history`); embedded context as the driver takes it; HTTP
/// MCP servers as the build takes them.
pub(super) fn capabilities(has_store: bool, driver: &dyn Driver) -> AgentCapabilities {
    let sessions = SessionCapabilities::new().close(SessionCloseCapabilities::new());
    let prompts = PromptCapabilities::new()
        .embedded_context(driver.embedded_context())
        .image(driver.images());
    let capabilities = match has_store {
        true => AgentCapabilities::new()
            .load_session(true)
            .session_capabilities(
                sessions
                    .list(SessionListCapabilities::new())
                    .resume(SessionResumeCapabilities::new())
                    .delete(SessionDeleteCapabilities::new()),
            ),
        false => AgentCapabilities::new().session_capabilities(sessions),
    };
    // Streamable HTTP MCP servers where the build has them; SSE (deprecated by MCP) never.
    let mcp = agent_client_protocol::v1::schema::McpCapabilities::new()
        .http(crate::mcp::HTTP_SUPPORTED)
        .sse(false);
    capabilities
        .prompt_capabilities(prompts)
        .mcp_capabilities(mcp)
}

impl Connection {
    /// The error for a session that is not active on this connection: a closed or stored one
    /// says how to bring it back.
    pub(super) fn inactive_session(&self, id: &SessionId) -> Error {
        let stored = self.store.as_ref().is_some_and(|s| s.load(&id.0).is_ok());
        if !stored {
            return unknown_session(id);
        }
        Error::new(
            ErrorCode::RESOURCE_NOT_FOUND,
            format!(
                "session {:?} is not active: it was closed, or made by an earlier acp-bash \
                 process; send session/load or session/resume first",
                &*id.0
            ),
        )
        .data(json!({ "sessionId": id }))
    }

    /// `session/list`: the stored sessions, newest first, read off the dispatch loop.
    pub(super) fn list(
        &self,
        request: ListSessionsRequest,
        responder: Responder<ListSessionsResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let Some(store) = self.store.clone() else {
            return responder.respond_with_error(no_history("session/list"));
        };
        if let Some(cwd) = request.cwd.as_ref().filter(|cwd| !cwd.is_absolute()) {
            return responder.respond_with_error(invalid_params(
                format!("cwd must be an absolute path, got {cwd:?}"),
                json!({ "cwd": cwd }),
            ));
        }
        if let Some(cursor) = request.cursor.as_deref() {
            if !crate::store::fs::is_cursor(cursor) {
                return responder.respond_with_error(invalid_params(
                    format!("{cursor:?} is not a cursor this agent gave out: pass a nextCursor from session/list"),
                    json!({ "cursor": cursor }),
                ));
            }
        }
        let query = ListQuery::new(LIST_PAGE_SIZE)
            .cwd(request.cwd)
            .cursor(request.cursor);
        cx.spawn(async move {
            let page = tokio::task::spawn_blocking(move || store.list(&query)).await;
            let answer = match page {
                Ok(Ok(page)) => Ok(ListSessionsResponse::new(
                    page.sessions
                        .into_iter()
                        .map(|s| {
                            SessionInfo::new(s.id, s.root)
                                .title(s.title)
                                .updated_at(iso8601(s.updated_ms))
                        })
                        .collect(),
                )
                .next_cursor(page.next_cursor)),
                Ok(Err(error)) => Err(Error::internal_error().data(json!(error.to_string()))),
                Err(error) => Err(Error::internal_error().data(json!(error.to_string()))),
            };
            if let Err(error) = responder.respond_with_result(answer) {
                tracing::debug!(%error, "could not answer session/list");
            }
            Ok(())
        })
    }

    /// `session/load`: restores the session (unless it is active here), replays its history as
    /// `session/update`s, then answers.
    pub(super) fn load(
        &self,
        request: LoadSessionRequest,
        responder: Responder<LoadSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        if self.store.is_none() {
            return responder.respond_with_error(no_history("session/load"));
        }
        let id = request.session_id;
        let (state, notes) = match self.active_or_restored(&id, &request.cwd) {
            Ok(restored) => restored,
            Err(error) => return responder.respond_with_error(error),
        };
        self.start_mcp(&state, &request.mcp_servers);
        // The providers' model lists, in the background (not waited for here).
        drop(self.driver.session_opening());
        let features = *self.features.lock().unwrap();
        let current = state.current_call.lock().unwrap().clone();
        let updates = replay(&state.log.record(), features, |call| {
            current.as_deref() == Some(call) || state.jobs.card_open(call)
        });
        tracing::info!(session = %id.0, updates = updates.len(), "session/load");
        for update in updates.into_iter().chain(notes.into_iter().map(agent_text)) {
            cx.send_notification(SessionNotification::new(id.clone(), update))?;
        }
        let modes = SandboxModes::new(self.off_allowed()).state(state.session.mode());
        // Before the answer (like the replay), so that it is part of what the session starts
        // with and its place on the wire is fixed.
        cx.send_notification(SessionNotification::new(
            id,
            super::slash::available_commands(),
        ))?;
        responder.respond(
            LoadSessionResponse::new()
                .modes(modes)
                .config_options(self.config_options(&state)),
        )
    }

    /// `session/resume`: restores the session (unless it is active here), without replay.
    pub(super) fn resume(
        &self,
        request: ResumeSessionRequest,
        responder: Responder<ResumeSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        if self.store.is_none() {
            return responder.respond_with_error(no_history("session/resume"));
        }
        let id = request.session_id;
        let (state, notes) = match self.active_or_restored(&id, &request.cwd) {
            Ok(restored) => restored,
            Err(error) => return responder.respond_with_error(error),
        };
        tracing::info!(session = %id.0, "session/resume");
        self.start_mcp(&state, &request.mcp_servers);
        drop(self.driver.session_opening());
        for note in notes {
            cx.send_notification(SessionNotification::new(id.clone(), agent_text(note)))?;
        }
        let modes = SandboxModes::new(self.off_allowed()).state(state.session.mode());
        // Before the answer (like the replay), so that it is part of what the session starts
        // with and its place on the wire is fixed.
        cx.send_notification(SessionNotification::new(
            id,
            super::slash::available_commands(),
        ))?;
        responder.respond(
            ResumeSessionResponse::new()
                .modes(modes)
                .config_options(self.config_options(&state)),
        )
    }

    /// The active session `id`, or the stored one made active, with what could not be restored.
    pub(super) fn active_or_restored(
        &self,
        id: &SessionId,
        request_cwd: &std::path::Path,
    ) -> Result<(Arc<SessionState>, Vec<String>), Error> {
        if let Some(state) = self.sessions.lock().unwrap().get(id).cloned() {
            return Ok((state, Vec::new()));
        }
        let store = self.store.as_ref().expect("checked by the handler");
        let mut record = store.load(&id.0).map_err(|error| match error {
            StoreError::NotFound(_) => Error::new(
                ErrorCode::RESOURCE_NOT_FOUND,
                format!(
                    "no session {:?} in the session store {} (deleted, or kept by an agent \
                     with another --state-dir)",
                    &*id.0,
                    store.dir().display()
                ),
            )
            .data(json!({ "sessionId": id })),
            error => Error::internal_error().data(json!(error.to_string())),
        })?;
        if record.root != request_cwd {
            tracing::info!(session = %id.0, root = %record.root.display(), cwd = %request_cwd.display(),
                "restoring a session in its own directory, not the one the request names");
        }
        let session = self.engine.session(&record.root).map_err(|error| {
            invalid_params(
                format!("the session cannot be restored: {error}"),
                json!({ "sessionId": id, "cwd": record.root }),
            )
        })?;
        let mut notes = Vec::new();
        let offered = sandbox::Mode::offered(self.off_allowed());
        match sandbox::Mode::from_id(&record.mode).filter(|mode| offered.contains(mode)) {
            Some(mode) => session.set_mode(mode),
            None => {
                notes.push(format!(
                    "This session was in sandbox mode {:?}, which this agent does not offer \
                     (only whoever starts the agent can turn the sandbox off): it runs in {:?} now.",
                    record.mode,
                    session.mode().id()
                ));
                record.mode = session.mode().id().to_string();
            }
        }
        if let Some(model) = record.model.clone() {
            let models = self.driver.models();
            if !models.iter().any(|offered| offered.id == model) {
                let default = models.first().map(|m| m.id.as_str());
                notes.push(match default {
                    Some(default) => format!(
                        "This session used model {model:?}, which this agent does not offer \
                         (start it with --model {model} to offer it): it uses {default:?} now."
                    ),
                    None => format!(
                        "This session used model {model:?}; this agent runs no model (start it \
                         with --model {model} to go on with it)."
                    ),
                });
                record.model = None;
            }
        }
        if let Some(level) = record.thought_level.clone() {
            // A level this agent does not offer (another driver): the default, silently (a
            // reasoning level changes no result, only its cost).
            if !self.driver.thought_levels().iter().any(|l| l.id == level) {
                record.thought_level = None;
            }
        }
        if !record.cwd.is_dir() {
            notes.push(format!(
                "This session's directory {} no longer exists: commands start in {} instead.",
                record.cwd.display(),
                record.root.display()
            ));
            record.cwd = record.root.clone();
        }
        session.restore_cwd(record.cwd.clone());
        notes.extend(session.restore_shell_state(record.shell.state()));
        let number = self.next_session.fetch_add(1, Ordering::Relaxed);
        Ok((self.open(id.clone(), number, session, record), notes))
    }

    /// `session/close`: kills the running command and the session's jobs, frees the session,
    /// writes its record whole (no journal left), and answers once the command is gone. The
    /// record stays (list, load and resume see it).
    pub(super) fn close(
        self: Arc<Self>,
        request: CloseSessionRequest,
        responder: Responder<CloseSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let id = request.session_id;
        let Some(state) = self.deactivate(&id) else {
            // Closing twice, or closing a stored session that is not active: nothing to free.
            let stored = self.store.as_ref().is_some_and(|s| s.load(&id.0).is_ok());
            return match stored {
                true => responder.respond(CloseSessionResponse::new()),
                false => responder.respond_with_error(unknown_session(&id)),
            };
        };
        tracing::info!(session = %id.0, "session/close");
        cx.spawn(async move {
            self.wait_until_stopped(&id, state.clone()).await;
            // The record is written whole, its journal folded in and removed: a closed
            // session is on disk as one file, which an older agent reads whole too.
            state.log.compact();
            if let Err(error) = responder.respond(CloseSessionResponse::new()) {
                tracing::debug!(%error, "could not answer session/close");
            }
            Ok(())
        })
    }

    /// `session/delete`: removes the record (closing the session first if it is active here).
    pub(super) fn delete(
        self: Arc<Self>,
        request: DeleteSessionRequest,
        responder: Responder<DeleteSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<()> {
        let Some(store) = self.store.clone() else {
            return responder.respond_with_error(no_history("session/delete"));
        };
        let id = request.session_id;
        let active = self.deactivate(&id);
        if let Some(state) = &active {
            // No write of the closing session may bring the record back.
            state.log.forget();
        }
        let answer = match store.delete(&id.0) {
            Ok(true) => Ok(DeleteSessionResponse::new()),
            Ok(false) if active.is_some() => Ok(DeleteSessionResponse::new()),
            Ok(false) => Err(unknown_session(&id)),
            Err(error) => Err(Error::internal_error().data(json!(error.to_string()))),
        };
        tracing::info!(session = %id.0, ok = answer.is_ok(), "session/delete");
        match active {
            None => responder.respond_with_result(answer),
            Some(state) => cx.spawn(async move {
                self.wait_until_stopped(&id, state).await;
                if let Err(error) = responder.respond_with_result(answer) {
                    tracing::debug!(%error, "could not answer session/delete");
                }
                Ok(())
            }),
        }
    }

    /// Takes the session off this connection and stops what it runs: later prompts get an
    /// error until it is loaded or resumed.
    pub(super) fn deactivate(&self, id: &SessionId) -> Option<Arc<SessionState>> {
        let state = self.sessions.lock().unwrap().remove(id)?;
        state.cancel_all();
        self.end_jobs(id, &state);
        // Its MCP servers end now, not when the last reference to the state goes.
        *state.mcp.lock().unwrap() = Arc::new(crate::mcp::McpServers::none());
        Some(state)
    }

    /// Kills the session's background jobs (and everything they started).
    fn end_jobs(&self, id: &SessionId, state: &SessionState) {
        tracing::debug!(session = %id.0, "killing the session's jobs");
        state.jobs.registry.kill_all();
    }

    /// Waits (bounded) until the session's running and queued turns have ended (their commands
    /// killed and reaped), then drops the session's memory.
    pub(super) async fn wait_until_stopped(&self, id: &SessionId, state: Arc<SessionState>) {
        let stopped = async {
            let _turn = state.turn.lock().await;
            // No turn runs now: what the driver keeps for the session goes.
            self.driver.session_closed(&id.0);
            state.jobs.registry.shutdown().await;
            // The cards record their jobs' ends: done before the session can be loaded again
            // (by a new log that would otherwise miss them).
            state.jobs.all_cards_done().await;
        };
        if tokio::time::timeout(SHUTDOWN_WAIT, stopped).await.is_err() {
            tracing::warn!(session = %id.0, "the session's command was still running {SHUTDOWN_WAIT:?} after it was closed");
        }
    }
}
