//! One whole ACP tool call in one library call: [`run_tool_call`] / [`ToolCallRunner`].
//!
//! Owns the life of a call on the wire: the opening `tool_call`, the live output (the card's
//! batches or a console view, [`Live`], each flushed on its deadline), the cap notice,
//! the final update. The acp-bash agent's turns are exactly this call. Must not touch: what the
//! updates look like (that is [`super::bridge`]), how batching decides ([`super::stream`]), how
//! commands run (the engine).

use std::time::Instant;

use agent_client_protocol::v1::schema::{
    ClientCapabilities, SessionId, SessionNotification, SessionUpdate, ToolCallId,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::Client;
use tokio_util::sync::CancellationToken;

use super::bridge::{self, ClientFeatures};
use crate::exec::Session;
use crate::present::model::{model_result, DEFAULT_MODEL_BUDGET};
use crate::present::stream::{self, Live, LiveUpdate, StreamLimits};
use crate::present::{present_call, present_run};
use crate::tool::{BashArgs, BashCall, BashResult};

/// Where a tool call's updates go, in order, each as soon as it is made.
///
/// Any `FnMut(SessionUpdate) + Send` is a sink; [`ConnectionSink`] sends them as `session/update`
/// notifications on an SDK connection.
pub trait UpdateSink: Send {
    /// Sends one update (a failure to send is the sink's to log; the run goes on).
    fn send(&mut self, update: SessionUpdate);

    /// Sends one update that only carries live output (a card's batch, a console view): the
    /// only kind a sink may drop, when its client is behind on reading. The producer says so;
    /// nothing inspects a built update to find out. By default it is sent like any other.
    fn send_live(&mut self, update: SessionUpdate) {
        self.send(update);
    }
}

impl<F: FnMut(SessionUpdate) + Send> UpdateSink for F {
    fn send(&mut self, update: SessionUpdate) {
        self(update)
    }
}

/// Sends updates as `session/update` notifications for one session on a connection.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConnectionSink {
    connection: ConnectionTo<Client>,
    session_id: SessionId,
}

impl ConnectionSink {
    /// A sink for `session_id`'s updates on `connection`.
    pub fn new(connection: ConnectionTo<Client>, session_id: SessionId) -> Self {
        ConnectionSink {
            connection,
            session_id,
        }
    }
}

impl UpdateSink for ConnectionSink {
    fn send(&mut self, update: SessionUpdate) {
        let notification = SessionNotification::new(self.session_id.clone(), update);
        if let Err(error) = self.connection.send_notification(notification) {
            tracing::debug!(%error, "could not send session/update");
        }
    }
}

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
    /// the model then reads [`model_result`]: the plain output within
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
                model_result(&result.outcome, self.model_budget)
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
        let features = self.features;
        let mut request = call.request().clone();
        // The card streams up to its cap; a console view keeps only a tail, so it takes all.
        let wanted = Live::wanted_bytes_for(features.card(), &self.limits);
        if wanted != usize::MAX {
            request = request.live_limit(wanted);
        }
        let mut handle = session.start(request);
        let view = present_call(call, handle.cwd());
        let mut opened = bridge::tool_call(call_id, call.command(), &view, features);
        if features.card() {
            // The card says which process to stop from outside (Zed has no stop of its own
            // for one command): known once the shell has started.
            if let Some(pid) = handle.pid().await {
                opened = bridge::with_process(opened, pid);
            }
        }
        sink.send(SessionUpdate::ToolCall(opened));

        // Live output: the card, a console view, or nothing (see `stream::Live`).
        let mut coalescer = Live::new(features.card(), self.limits, &view.echo);
        let live = |sink: &mut dyn UpdateSink, data: Option<LiveUpdate>| {
            if let Some(data) = data {
                let update = bridge::live_update(call_id, &view, &data);
                sink.send_live(SessionUpdate::ToolCallUpdate(update));
            }
        };
        let control = handle.cancellation_token();
        drain_live(
            &mut handle,
            &mut coalescer,
            &mut |data| live(sink, Some(data)),
            cancel,
            || control.cancel(),
        )
        .await;

        let result = BashResult::of(handle.wait().await);
        if coalescer.capped() {
            let truncation = result.outcome.status.truncation.as_ref();
            if let Some(path) = truncation.and_then(|t| t.full_output.as_deref()) {
                live(
                    sink,
                    Some(LiveUpdate::Append(stream::full_output_notice(path))),
                );
            }
        }
        let presented = present_run(&view, &result);
        sink.send(SessionUpdate::ToolCallUpdate(bridge::final_update(
            call_id, &view, &presented, features,
        )));
        tracing::info!(call = %call_id.0, status = ?bridge::final_status(&presented), "call finished");
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

/// The one drain loop of a call on the wire (a turn's call, a job's card): reads `output` until
/// it ends, feeding `live` and handing each update it makes to `emit`, flushing on `live`'s
/// deadlines; the first time `cancel` fires, `on_cancel` runs (and reading goes on until the
/// output ends). Ends with `live`'s last update.
pub(crate) async fn drain_live<S>(
    output: &mut S,
    live: &mut Live,
    emit: &mut (dyn FnMut(LiveUpdate) + Send),
    cancel: &CancellationToken,
    on_cancel: impl FnOnce(),
) where
    S: futures::Stream<Item = String> + Unpin,
{
    use futures::StreamExt;
    let mut on_cancel = Some(on_cancel);
    loop {
        let deadline = live.deadline();
        tokio::select! {
            chunk = output.next() => match chunk {
                Some(chunk) => live.push(&chunk, Instant::now()).into_iter().for_each(&mut *emit),
                None => break,
            },
            () = sleep_until(deadline), if deadline.is_some() => {
                live.poll(Instant::now()).into_iter().for_each(&mut *emit);
            }
            () = cancel.cancelled(), if on_cancel.is_some() => {
                if let Some(on_cancel) = on_cancel.take() {
                    on_cancel();
                }
            }
        }
    }
    live.finish(Instant::now()).into_iter().for_each(emit);
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}
