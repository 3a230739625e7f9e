//! One whole ACP tool call in one library call: [`run_tool_call`] / [`ToolCallRunner`].
//!
//! Owns: starting a turn's call on the engine and handing its life on the wire (the opening
//! `tool_call`, the live output, the notices, the final update) to the one sequencer,
//! [`super::call_wire::CallWire`]. The acp-bash agent's turns are exactly this call. Must not
//! touch: what the updates look like (that is [`super::bridge`]), how batching decides
//! ([`super::stream`]), how commands run (the engine), the order of a call's updates (the
//! sequencer's).

use agent_client_protocol::v1::schema::{ClientCapabilities, ToolCallId};
use tokio_util::sync::CancellationToken;

use super::bridge::{self, ClientFeatures};
use super::call_wire::CallWire;
use super::changes_card;
use crate::exec::Session;
use crate::present::changes::present_changes;
use crate::present::model::{model_text, DEFAULT_MODEL_BUDGET};
use crate::present::stream::{Live, StreamLimits};
use crate::present::{present_call, present_run};
use crate::tool::{BashArgs, BashCall, BashResult};

pub use super::call_wire::{ConnectionSink, UpdateSink};

/// Runs bash tool calls over ACP for one client: what it renders, and how live output is batched.
///
/// `ToolCallRunner::default()` is a runner for a plain client ([`ClientFeatures::default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCallRunner {
    /// What the client renders (from `initialize`): a terminal card, or console blocks only.
    pub features: ClientFeatures,
    /// How live output is batched and capped.
    pub limits: StreamLimits,
    /// Bytes of output a model reads of a call ([`ToolCallRunner::run_model_call`]).
    pub model_budget: usize,
    /// The ACP v2 face: each call is an agent-owned terminal ([`super::v2`]); its sink must
    /// carry v2 updates ([`super::v2::V2Sink`]).
    pub v2: bool,
}

impl Default for ToolCallRunner {
    fn default() -> Self {
        ToolCallRunner::new(ClientFeatures::default())
    }
}

impl ToolCallRunner {
    /// A runner for a client with `features`, with the default [`StreamLimits`] and
    /// [`DEFAULT_MODEL_BUDGET`].
    pub fn new(features: ClientFeatures) -> Self {
        ToolCallRunner {
            features,
            limits: StreamLimits::default(),
            model_budget: DEFAULT_MODEL_BUDGET,
            v2: false,
        }
    }

    /// A runner for the client whose `initialize` request declared `capabilities`
    /// ([`ClientFeatures::from_capabilities`]).
    pub fn for_client(capabilities: &ClientCapabilities) -> Self {
        ToolCallRunner::new(ClientFeatures::from_capabilities(capabilities))
    }

    /// Sets [`ToolCallRunner::limits`].
    pub fn limits(mut self, limits: StreamLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Runs each call on the ACP v2 face ([`ToolCallRunner::v2`]).
    pub fn on_v2(mut self) -> Self {
        self.v2 = true;
        self.features = ClientFeatures::CARD;
        self
    }

    /// Sets [`ToolCallRunner::model_budget`].
    pub fn model_budget(mut self, bytes: usize) -> Self {
        self.model_budget = bytes;
        self
    }

    /// Runs a model's bash tool call, given the call's JSON arguments as the model wrote them
    /// (OpenAI passes a string; pass an Anthropic `input` object as `input.to_string()`), and
    /// returns what the model reads back.
    ///
    /// Valid arguments ([`BashArgs`]) run as [`ToolCallRunner::run`] does (the same updates);
    /// the model then reads [`model_text`]: the plain output within
    /// [`ToolCallRunner::model_budget`], then the status markers. Invalid arguments run nothing
    /// and send no update; the model reads what is wrong and what is expected
    /// ([`ArgsError`](crate::tool::ArgsError)), so that it can try again.
    pub async fn run_model_call(
        &self,
        session: &Session,
        call_id: &ToolCallId,
        arguments: &str,
        sink: &mut dyn UpdateSink,
        cancel: &CancellationToken,
    ) -> String {
        match BashArgs::from_json(arguments) {
            Ok(args) => {
                let call = args.into_call();
                let result = self.run(session, call_id, &call, sink, cancel).await;
                model_text(&result, self.model_budget)
            }
            Err(error) => error.to_string(),
        }
    }

    /// Runs `call` on `session` as the tool call `call_id`: sends the `tool_call` (titled with
    /// the command, with the directory it really runs in), the live output while it runs (the
    /// card's batches, or a console view of the last lines for other clients unless
    /// [`StreamLimits::plain_live`] is off; each flushed on its deadline), the cap notice if the output
    /// passed the stream cap, then the final update; returns the result. Cancelling `cancel`
    /// kills the command; the call then ends `failed` with `[cancelled]`. Dropping the returned
    /// future kills the command too (no final update is sent then).
    pub async fn run(
        &self,
        session: &Session,
        call_id: &ToolCallId,
        call: &BashCall,
        sink: &mut dyn UpdateSink,
        cancel: &CancellationToken,
    ) -> BashResult {
        self.run_until_ended(session, call_id, call, sink, cancel, || {})
            .await
    }

    /// [`Self::run`], calling `before_end` once the command has ended, just before its final
    /// updates go out (the v2 face stops offering `terminal/cancel` there).
    pub(crate) async fn run_until_ended(
        &self,
        session: &Session,
        call_id: &ToolCallId,
        call: &BashCall,
        sink: &mut dyn UpdateSink,
        cancel: &CancellationToken,
        before_end: impl FnOnce(),
    ) -> BashResult {
        // A read, a search or a listing is never a card ([`crate::present::is_classified`]).
        // (On the v2 face the output stays in the call's terminal.)
        let features = match !self.v2 && crate::present::is_classified(call) {
            true => ClientFeatures {
                terminal_output: false,
                ..self.features
            },
            false => self.features,
        };
        let mut request = call.request().clone();
        // The card streams up to its cap; a console view keeps only a tail, so it takes all.
        let wanted = Live::wanted_bytes_for(features.card(), &self.limits);
        if wanted != usize::MAX {
            request = request.live_limit(wanted);
        }
        // What the command changes in the session folder ([`crate::changes`]): whatever
        // changed before it (the editor, a job) goes into the baseline first.
        let tracker = match session.engine().config().track_changes {
            true => {
                let session = session.clone();
                tokio::task::spawn_blocking(move || {
                    let tracker = session.changes();
                    if let Some(tracker) = &tracker {
                        tracker.begin();
                    }
                    tracker
                })
                .await
                .ok()
                .flatten()
            }
            false => None,
        };
        let mut handle = session.start(request);
        let view = present_call(call, handle.cwd());
        // The card says which process to stop from outside (Zed has no stop of its own for one
        // command): known once the shell has started.
        let process = if features.card() {
            handle.pid().await
        } else {
            None
        };
        let mut wire = if self.v2 {
            CallWire::open_v2(call_id.clone(), call.command(), view, self.limits, sink)
        } else {
            CallWire::open_with_process(
                call_id.clone(),
                call.command(),
                view,
                features,
                self.limits,
                process,
                sink,
            )
        };
        let control = handle.cancellation_token();
        wire.follow(&mut handle.events(), sink, cancel, move || control.cancel())
            .await;
        let mut result = BashResult::of(handle.wait().await);
        let changes = match tracker {
            Some(tracker) => {
                let id = call_id.0.to_string();
                tokio::task::spawn_blocking(move || {
                    let changes = tracker.finish();
                    (!changes.is_empty()).then(|| {
                        tracker.keep(&id, &changes);
                        present_changes(&changes, "Changed")
                    })
                })
                .await
                .ok()
                .flatten()
            }
            None => None,
        };
        result.changed = changes.as_ref().map(|view| view.summary.clone());
        result.changes = changes.clone();
        let presented = present_run(wire.view(), &result);
        let status = bridge::final_status(&presented);
        before_end();
        wire.end(sink, Some(&result.outcome.status), &presented, false);
        if let Some(view) = &changes {
            match self.v2 {
                true => sink.send_v2(changes_card::changes_call_v2(call_id, view)),
                false => sink.send(changes_card::changes_call(call_id, view, self.features)),
            }
        }
        tracing::info!(call = %call_id.0, ?status, "call finished");
        result
    }
}

/// [`ToolCallRunner::run`] in one call: `ToolCallRunner::new(features).limits(limits).run(…)`.
pub async fn run_tool_call(
    session: &Session,
    call_id: &ToolCallId,
    call: &BashCall,
    features: ClientFeatures,
    limits: StreamLimits,
    sink: &mut dyn UpdateSink,
    cancel: &CancellationToken,
) -> BashResult {
    ToolCallRunner::new(features)
        .limits(limits)
        .run(session, call_id, call, sink, cancel)
        .await
}
