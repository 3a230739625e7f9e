//! One tool call's life on the wire, whoever makes it: [`CallWire`] sends the `tool_call`, the
//! live output while the command runs, the notices, the card's status line and the final update,
//! in that order. A turn's call ([`super::tool_call`]), a `/bg` job's card ([`super::commands`])
//! and a replayed call ([`super::replay`]) all go through it.
//!
//! Owns: the order of a call's updates, the class of each (only live output, a card's batch or
//! a console view, is ever left out, and only while the sink says it is not wanted: the client
//! is behind on reading; the `tool_call`, the notices, the status line and the final update
//! always go), and that every notice starts on a line of its own on the card (what the client
//! was really sent so far decides). Must not touch: what the updates look like (the bridge's),
//! when live output is due (`present::stream`), how commands run (the engine), sending (the
//! sink's).

use agent_client_protocol::v1::schema::{
    SessionId, SessionNotification, SessionUpdate, ToolCallId, ToolCallStatus,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::Client;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

use super::bridge::{self, ClientFeatures};
use super::transport::ClientBehind;
use crate::exec::drain::{drain, notice_line, DrainReader, OutputEvent};
use crate::exec::{Exit, RunStatus};
use crate::present::stream::{ended_notice, Live, LiveUpdate, StreamLimits};
use crate::present::{CallView, ResultView};
use crate::tool::markers::render_result;

/// Where a tool call's updates go, in order, each as soon as it is made.
///
/// Any `FnMut(SessionUpdate) + Send` is a sink; [`ConnectionSink`] sends them as `session/update`
/// notifications on an SDK connection.
pub trait UpdateSink: Send {
    /// Sends one update (a failure to send is the sink's to log; the run goes on). Nothing sent
    /// here may be dropped.
    fn send(&mut self, update: SessionUpdate);

    /// Whether live output (a card's batch, a console view) is wanted right now: `false` while
    /// the client is behind on reading. The call's sequencer then makes none, and says so
    /// nowhere else; everything else is still sent. By default always `true`.
    fn live_wanted(&self) -> bool {
        true
    }

    /// Sends one ACP v2 update: only a call opened for the v2 face ([`CallWire::open_v2`])
    /// makes them, and only the v2 face's sink ([`super::v2::V2Sink`]) carries them. Any other
    /// sink logs and drops it.
    fn send_v2(&mut self, update: agent_client_protocol::v2::schema::SessionUpdate) {
        tracing::error!(
            ?update,
            "a v2 update on a sink without the v2 face: not sent"
        );
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
    behind: Option<ClientBehind>,
}

impl ConnectionSink {
    /// A sink for `session_id`'s updates on `connection`.
    pub fn new(connection: ConnectionTo<Client>, session_id: SessionId) -> Self {
        ConnectionSink {
            connection,
            session_id,
            behind: None,
        }
    }

    /// Wants no live output while `behind` is up (the transport's
    /// [`super::LineTransport::client_behind`]): a client that does not read gets only what it
    /// must not miss.
    pub fn skip_live_while(mut self, behind: ClientBehind) -> Self {
        self.behind = Some(behind);
        self
    }
}

impl UpdateSink for ConnectionSink {
    fn send(&mut self, update: SessionUpdate) {
        let notification = SessionNotification::new(self.session_id.clone(), update);
        if let Some(behind) = &self.behind {
            behind.update_made();
        }
        if let Err(error) = self.connection.send_notification(notification) {
            tracing::debug!(%error, "could not send session/update");
            if let Some(behind) = &self.behind {
                behind.update_arrived();
            }
        }
    }

    fn live_wanted(&self) -> bool {
        !self.behind.as_ref().is_some_and(ClientBehind::is_behind)
    }
}

/// A call on the wire: opened with its `tool_call`, fed its output, ended with its final update.
#[derive(Debug)]
#[non_exhaustive]
pub struct CallWire {
    id: ToolCallId,
    view: CallView,
    features: ClientFeatures,
    live: Live,
    /// Whether what the card shows so far (what was really sent) ends a line.
    at_line_start: bool,
    /// Live updates left out while the client was behind.
    skipped: u64,
    /// The ACP v2 face: the call is an agent-owned terminal ([`super::v2`]).
    v2: bool,
    /// The command (kept on the v2 face only: a replayed terminal's snapshot names it).
    command: String,
}

impl CallWire {
    /// Sends the `tool_call` of call `id` running `command` (titled and echoed from `view`) and
    /// returns the call, ready for its output: live output as `limits` say for a client with
    /// `features`.
    pub fn open(
        id: ToolCallId,
        command: &str,
        view: CallView,
        features: ClientFeatures,
        limits: StreamLimits,
        sink: &mut dyn UpdateSink,
    ) -> CallWire {
        Self::open_with_process(id, command, view, features, limits, None, sink)
    }

    /// [`Self::open`], with the host pid of the command's outermost process (its group
    /// leader) in the card's `terminal_info` when `process` is known and the client shows
    /// the card.
    pub fn open_with_process(
        id: ToolCallId,
        command: &str,
        view: CallView,
        features: ClientFeatures,
        limits: StreamLimits,
        process: Option<u32>,
        sink: &mut dyn UpdateSink,
    ) -> CallWire {
        // A read, a search or a listing is shown as text, never as a card.
        let features = features.for_view(&view);
        let mut opened = bridge::tool_call(&id, command, &view, features);
        if let (true, Some(pid)) = (features.card(), process) {
            opened = bridge::with_process(opened, pid);
        }
        sink.send(SessionUpdate::ToolCall(opened));
        let live = Live::new(features.card(), limits, &view.echo);
        CallWire {
            id,
            view,
            features,
            live,
            at_line_start: true,
            skipped: 0,
            v2: false,
            command: String::new(),
        }
    }

    /// The call on the ACP v2 face: sends its terminal (command, cwd, cancellable) and then the
    /// `tool_call_update` that shows it; its output goes as `terminal_output_chunk`s, batched
    /// and capped like the card's.
    pub fn open_v2(
        id: ToolCallId,
        command: &str,
        view: CallView,
        limits: StreamLimits,
        sink: &mut dyn UpdateSink,
    ) -> CallWire {
        Self::open_v2_as(id, command, view, limits, true, sink)
    }

    /// [`Self::open_v2`] for a replayed call: `cancellable` only when it is still running in
    /// this process (a replayed call that ended is announced without `capabilities.cancel`).
    pub fn open_v2_as(
        id: ToolCallId,
        command: &str,
        view: CallView,
        limits: StreamLimits,
        cancellable: bool,
        sink: &mut dyn UpdateSink,
    ) -> CallWire {
        sink.send_v2(match cancellable {
            true => super::v2::terminal_opened(&id, command, &view.cwd),
            false => super::v2::terminal_replayed(&id, command, &view.cwd),
        });
        sink.send_v2(super::v2::call_opened(&id, &view, command));
        let live = Live::new(true, limits, &view.echo);
        CallWire {
            id,
            view,
            features: ClientFeatures::CARD,
            live,
            at_line_start: true,
            skipped: 0,
            v2: true,
            command: command.to_string(),
        }
    }

    /// The call's view.
    pub fn view(&self) -> &CallView {
        &self.view
    }

    /// The call's id.
    pub fn id(&self) -> &ToolCallId {
        &self.id
    }

    /// Streams `output` until it ends (the one drain, [`crate::exec::drain`]): the card's
    /// batches or a console view, each flushed on its deadline, then the cap notice if the
    /// output passed the cap. The first time `cancel` fires, `on_cancel` runs (and reading goes
    /// on until the output ends).
    pub async fn follow<S>(
        &mut self,
        output: &mut S,
        sink: &mut dyn UpdateSink,
        cancel: &CancellationToken,
        on_cancel: impl FnOnce(),
    ) where
        S: futures::Stream + Unpin + ?Sized,
        S::Item: Into<OutputEvent>,
    {
        {
            let mut reader = Reader { wire: self, sink };
            drain(output, &mut reader, cancel, on_cancel).await;
        }
        let update = self.live.finish(Instant::now());
        self.live_update(sink, update);
        if self.skipped > 0 {
            tracing::info!(call = %self.id.0, skipped = self.skipped, "live updates left out: the client was behind");
        }
    }

    /// Output known all at once (a replayed call's recorded output): one card update, never
    /// left out; nothing for a client without the card (its final update shows it).
    pub fn recorded_output(&mut self, sink: &mut dyn UpdateSink, output: &str) {
        if self.v2 {
            // One snapshot per terminal (it replaces, so a replay never doubles output).
            sink.send_v2(super::v2::snapshot(
                &self.id,
                &self.command,
                &self.view.cwd,
                output,
            ));
            self.at_line_start = output.is_empty() || output.ends_with('\n');
        } else if self.features.card() && !output.is_empty() {
            self.card_text(sink, output.to_string());
        }
    }

    /// Ends the call: on the card, where the full output is (once the stream hit its cap) and
    /// the status line of a run that timed out, was cancelled or was killed by a signal (the
    /// words a console block ends with), each on a line of its own; then the final update
    /// (titled again when `retitle`: a job's end comes after its turn, and clients such as acpx
    /// show an update without a title untitled). `status` is how the run ended, when known.
    pub fn end(
        mut self,
        sink: &mut dyn UpdateSink,
        status: Option<&RunStatus>,
        presented: &ResultView,
        retitle: bool,
    ) {
        if self.features.card() {
            if self.live.capped() {
                let truncation = status.and_then(|status| status.truncation.as_ref());
                self.notice(sink, &ended_notice(truncation));
            }
            if let Some(line) = status.and_then(card_status_line) {
                self.notice(sink, &line);
            }
        }
        let mut update = bridge::final_update(&self.id, &self.view, presented, self.features);
        if self.v2 {
            let exit = update
                .meta
                .as_ref()
                .and_then(|meta| meta.get("terminal_exit"))
                .cloned()
                .unwrap_or_default();
            let exit_code = exit.get("exit_code").and_then(serde_json::Value::as_i64);
            let signal = exit
                .get("signal")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string);
            sink.send_v2(super::v2::terminal_exited(&self.id, exit_code, signal));
            let status = update.fields.status.unwrap_or(ToolCallStatus::Failed);
            let title = retitle.then(|| bridge::title(&self.view, self.features));
            sink.send_v2(super::v2::call_ended(
                &self.id,
                status,
                update.fields.raw_output.take(),
                title,
            ));
            return;
        }
        if retitle {
            update.fields.title = Some(bridge::title(&self.view, self.features));
        }
        sink.send(SessionUpdate::ToolCallUpdate(update));
    }

    /// Live output: left out while the sink does not want it.
    fn live_update(&mut self, sink: &mut dyn UpdateSink, update: Option<LiveUpdate>) {
        if let Some(update) = update {
            if !sink.live_wanted() {
                self.skipped += 1;
            } else {
                match update {
                    LiveUpdate::Append(data) => self.card_text(sink, data),
                    LiveUpdate::Replace(_) => sink.send(SessionUpdate::ToolCallUpdate(
                        bridge::live_update(&self.id, &self.view, &update),
                    )),
                }
            }
        }
        if let Some(notice) = self.live.take_notice() {
            self.notice(sink, &notice);
        }
    }

    /// A line of acp-bash's own on the card: never left out, and on a line of its own.
    fn notice(&mut self, sink: &mut dyn UpdateSink, line: &str) {
        let text = if self.at_line_start {
            line.to_string()
        } else {
            format!("\r\n{line}")
        };
        self.card_text(sink, text);
    }

    fn card_text(&mut self, sink: &mut dyn UpdateSink, data: String) {
        if data.is_empty() {
            return;
        }
        self.at_line_start = data.ends_with('\n');
        if self.v2 {
            sink.send_v2(super::v2::chunk(&self.id, &data));
            return;
        }
        sink.send(SessionUpdate::ToolCallUpdate(bridge::output_update(
            &self.id, &data,
        )));
    }
}

/// The card's status line for a run that did not simply exit: `[timed out after 5s] [killed by
/// signal: SIGTERM]`, `[cancelled] [killed by signal: SIGTERM]`, `[killed by signal: SIGKILL]`
/// (the marker renderer's words; where the full output is, is the notice's). A plain exit has
/// none: the card shows its exit code itself.
fn card_status_line(status: &RunStatus) -> Option<String> {
    let abnormal = status.timed_out_after.is_some()
        || status.cancelled
        || matches!(status.exit, Exit::Signal(_));
    abnormal.then(|| {
        let status = RunStatus {
            truncation: None,
            ..status.clone()
        };
        format!("{}\r\n", render_result("", &status))
    })
}

/// The drain's reader for a call: each chunk and deadline into the live policy, each update it
/// makes onto the wire.
struct Reader<'a> {
    wire: &'a mut CallWire,
    sink: &'a mut dyn UpdateSink,
}

impl DrainReader for Reader<'_> {
    fn chunk(&mut self, chunk: String) {
        let update = self.wire.live.push(&chunk, Instant::now());
        self.wire.live_update(self.sink, update);
    }

    /// On the card of a client that asked for notices apart: what the card holds back goes
    /// first, then the notice as an update of its own (never left out). Otherwise a line among
    /// the output, as before.
    fn notice(&mut self, text: String) {
        let wire = &mut *self.wire;
        if !(wire.features.notices_apart && wire.features.card() && !wire.v2) {
            self.chunk(notice_line(&text));
            return;
        }
        let update = wire.live.finish(Instant::now());
        wire.live_update(self.sink, update);
        self.sink
            .send(SessionUpdate::ToolCallUpdate(bridge::notice_update(
                &wire.id, &text,
            )));
    }

    fn deadline(&self) -> Option<Instant> {
        self.wire.live.deadline()
    }

    fn due(&mut self, now: Instant) {
        let update = self.wire.live.poll(now);
        self.wire.live_update(self.sink, update);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Truncation;
    use crate::present::{present_call, present_ended};
    use crate::tool::BashCall;
    use serde_json::Value;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// A sink that keeps every update and wants live output only while `wanted` is up.
    struct Kept {
        updates: Vec<Value>,
        wanted: Arc<AtomicBool>,
    }

    impl UpdateSink for Kept {
        fn send(&mut self, update: SessionUpdate) {
            self.updates.push(serde_json::to_value(update).unwrap());
        }
        fn live_wanted(&self) -> bool {
            self.wanted.load(Ordering::SeqCst)
        }
    }

    fn card_data(updates: &[Value]) -> String {
        updates
            .iter()
            .filter_map(|u| u["_meta"]["terminal_output"]["data"].as_str())
            .collect()
    }

    fn small_cap() -> StreamLimits {
        StreamLimits {
            max_streamed_bytes: 10,
            ..StreamLimits::default()
        }
    }

    /// While the client is behind, live output is left out, but the cap notice, where the full
    /// output is, the status line and the final update all arrive, each notice on a line of its
    /// own although the last output the client got ended mid-line.
    #[tokio::test]
    async fn notices_status_and_final_are_never_left_out_and_start_their_own_lines() {
        let wanted = Arc::new(AtomicBool::new(true));
        let mut sink = Kept {
            updates: Vec::new(),
            wanted: wanted.clone(),
        };
        let view = present_call(&BashCall::new("flood"), Path::new("/w"));
        let mut wire = CallWire::open(
            ToolCallId::new("c"),
            "flood",
            view,
            ClientFeatures::CARD,
            small_cap(),
            &mut sink,
        );
        let mut output = futures::stream::iter(vec!["12345".to_string()]);
        wire.follow(&mut output, &mut sink, &CancellationToken::new(), || {})
            .await;
        // The client stops reading: the chunk that crosses the cap is not shown anyway, and
        // nothing live is sent; the notice still is.
        wanted.store(false, Ordering::SeqCst);
        let mut more = futures::stream::iter(vec!["678".to_string(), "90abc".to_string()]);
        wire.follow(&mut more, &mut sink, &CancellationToken::new(), || {})
            .await;
        let status = RunStatus {
            cancelled: true,
            ..RunStatus::exited(0)
        }
        .truncated(Truncation::new(9, Some("/logs/1.log".into())));
        let status = RunStatus {
            exit: Exit::Signal(15),
            ..status
        };
        let presented = present_ended(Path::new("/w"), "", "12345", &status, None);
        wire.end(&mut sink, Some(&status), &presented, false);
        let data = card_data(&sink.updates);
        assert!(
            data.starts_with("12345\r\n[acp-bash: stopped streaming after 10 bytes;"),
            "{data:?}"
        );
        assert!(
            data.ends_with(
                "]\r\n[acp-bash: full output: /logs/1.log]\r\n[cancelled] [killed by signal: SIGTERM]\r\n"
            ),
            "{data:?}"
        );
        assert!(!data.contains("678"), "live output left out: {data:?}");
        let last = sink.updates.last().unwrap();
        assert_eq!(last["status"], "failed");
        assert_eq!(last["_meta"]["terminal_exit"]["signal"], "SIGTERM");
    }

    #[tokio::test]
    async fn a_retitled_end_carries_the_title_and_a_plain_exit_has_no_status_line() {
        let mut sink = Kept {
            updates: Vec::new(),
            wanted: Arc::new(AtomicBool::new(true)),
        };
        let view = present_call(&BashCall::new("echo a\necho b"), Path::new("/w"));
        let mut wire = CallWire::open(
            ToolCallId::new("c"),
            "echo a\necho b",
            view,
            ClientFeatures::CARD,
            StreamLimits::default(),
            &mut sink,
        );
        wire.recorded_output(&mut sink, "a\nb\n");
        let status = RunStatus::exited(3);
        let presented = present_ended(Path::new("/w"), "", "a\nb\n", &status, None);
        wire.end(&mut sink, Some(&status), &presented, true);
        assert_eq!(card_data(&sink.updates), "a\nb\n");
        let last = sink.updates.last().unwrap();
        assert_eq!(last["title"], "echo a\necho b");
    }
}
