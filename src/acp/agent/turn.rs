//! `session/prompt`: a prompt becomes a turn of the agent's driver, on the wire.
//!
//! Owns: checking the prompt (its session, its size), reading its ACP content into a
//! provider-neutral [`Prompt`], registering the turn's cancellation, running the turn
//! ([`crate::turn::run_turn`]) as a connection task, the [`TurnPort`] that puts the turn's
//! events on the wire (messages, thoughts, usage, the title, each call's card or console block,
//! slash commands), and answering with the turn's stop reason. Must not touch: what a prompt
//! means (the driver's), what is recorded (the turn's), how a call looks (the bridge's).
//!
//! Concurrency: the handler only validates, registers and `cx.spawn`s; the turn waits for the
//! session's earlier turn there. A call runs on a tracked tokio task (shutdown waits for it).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Cost, EmbeddedResourceResource, PromptRequest, PromptResponse,
    SessionId, SessionInfoUpdate, SessionUpdate, StopReason as AcpStopReason, ToolCallId,
    UsageUpdate,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
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
use crate::driver::commands::SlashCommand;
use crate::driver::{Prompt, PromptBlock, StopReason, TurnError, Usage};
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
        let port = AcpTurn {
            connection: self,
            cx,
            session_id,
            state,
            features: *self.features.lock().unwrap(),
            card: Mutex::new(None),
            failure: Mutex::new(None),
        };
        let new_call_id = || state.new_call_id().0.to_string();
        let turn = Turn::new(
            &port,
            &state.session,
            &session_id.0,
            &state.jobs.registry,
            &state.log,
            token.clone(),
            &new_call_id,
            prompt.text(),
        )
        .model(state.model.lock().unwrap().clone());
        let ended = run_turn(&*self.driver, prompt, turn).await;
        let card = port.card.lock().unwrap().take();
        if let Some(failure) = port.failure.lock().unwrap().take() {
            return (Err(Error::internal_error().data(failure)), card);
        }
        let ended = match ended {
            Ok(stop) => Ok(acp_stop_reason(stop)),
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

/// A turn's events on the wire, for one session of one connection.
struct AcpTurn<'a> {
    connection: &'a Connection,
    cx: &'a ConnectionTo<Client>,
    session_id: &'a SessionId,
    state: &'a Arc<SessionState>,
    features: ClientFeatures,
    /// A `/bg` job's card, spawned once the prompt is answered.
    card: Mutex<Option<JobCard>>,
    /// A call's task failed (it panicked): the prompt is answered with this error.
    failure: Mutex<Option<String>>,
}

impl AcpTurn<'_> {
    fn sink(&self) -> ConnectionSink {
        ConnectionSink::new(self.cx.clone(), self.session_id.clone())
    }

    fn send(&self, update: SessionUpdate) {
        self.sink().send(update);
    }
}

impl TurnPort for AcpTurn<'_> {
    fn message(&self, text: &str) {
        self.send(bridge::agent_message(text));
    }

    fn thought(&self, text: &str) {
        self.send(SessionUpdate::AgentThoughtChunk(ContentChunk::new(
            text.to_string().into(),
        )));
    }

    fn usage(&self, usage: &Usage) {
        let mut update = UsageUpdate::new(usage.used, usage.size);
        if let Some(cost) = &usage.cost {
            update = update.cost(Cost::new(cost.amount, cost.currency.clone()));
        }
        self.send(SessionUpdate::UsageUpdate(update));
    }

    fn title(&self, title: &str) {
        // The title only: a clock reading would make every transcript differ.
        self.send(SessionUpdate::SessionInfoUpdate(
            SessionInfoUpdate::new().title(title.to_string()),
        ));
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
            let runner = ToolCallRunner::new(self.features).limits(connection.limits);
            // The call runs on a tracked tokio task, so that shutdown can wait for the kill.
            let run = {
                let session = self.state.session.clone();
                // While the client is behind on reading, the call makes no live output;
                // everything else (the final update above all) always goes.
                let mut sink = self
                    .sink()
                    .skip_live_while(connection.client_behind.clone());
                let token = cancel.clone();
                let call_id = call_id.clone();
                let call = call.clone();
                connection.runs.spawn(async move {
                    runner
                        .run(&session, &call_id, &call, &mut sink, &token)
                        .await
                })
            };
            let result = run.await;
            *self.state.current_call.lock().unwrap() = None;
            match result {
                Ok(result) => result,
                Err(error) => {
                    tracing::error!(%error, "the command's task failed");
                    let message = format!("acp-bash could not run the command: {error}");
                    let view = present_call(&BashCall::new(""), &self.state.session.cwd());
                    let update = bridge::final_update(
                        &call_id,
                        &view,
                        &ResultView::Text {
                            console: console_block(&message),
                        },
                        self.features,
                    );
                    self.send(SessionUpdate::ToolCallUpdate(update));
                    *self.failure.lock().unwrap() = Some(error.to_string());
                    BashResult::failed(message, self.state.session.cwd())
                }
            }
        }
        .boxed()
    }

    fn run_command(&self, command: SlashCommand) -> BoxFuture<'_, String> {
        async move {
            let new_call_id = || self.state.new_call_id();
            let behind = self.connection.client_behind.clone();
            let sink = move || -> Box<dyn UpdateSink> {
                Box::new(self.sink().skip_live_while(behind.clone()))
            };
            let turn = CommandTurn {
                sink: &sink,
                v2: false,
                session: &self.state.session,
                jobs: &self.state.jobs,
                log: &self.state.log,
                features: self.features,
                limits: self.connection.limits,
                new_call_id: &new_call_id,
            };
            let (answer, card) = turn.run(command).await;
            self.message(&answer);
            *self.card.lock().unwrap() = card;
            answer
        }
        .boxed()
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
            ContentBlock::Image(_) => PromptBlock::Other {
                kind: "image".into(),
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
