//! The outgoing side of the line transport: a queue of lines that a writer task drains to the
//! client, bounded by what may be dropped.
//!
//! Owns: the queue and its size, raising [`super::ClientBehind`] while the client is not reading
//! (every line is still queued: what may be left out is decided where updates are made, never
//! by reading lines back), capping the data of large error responses, noticing the response to
//! a pending `initialize`, and the writer. Must not touch: what the lines mean beyond their
//! JSON-RPC envelope.
//!
//! The SDK hands over each line and waits for the sink to flush it; this sink accepts every line
//! at once (so nothing piles up unseen in the SDK's own unbounded queues) and the writer writes
//! them in order. The queue's size is known here, so the reader can stop taking requests and
//! the agent can stop making live output while the client is not reading.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use serde_json::Value;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;

use super::envelope::Envelope;
use super::TransportLimits;

/// An error response line larger than this has its `data` cut (see [`cap_error_data`]).
pub const MAX_ERROR_LINE_BYTES: usize = 8 * 1024;

/// What the reader and the writer share.
pub(super) struct Shared {
    state: Mutex<State>,
    /// Wakes the writer: a line was queued, or the sink was closed.
    writer_wake: Notify,
    /// Wakes the reader: the queue shrank, or the response it waits for went out.
    reader_wake: Notify,
    limits: TransportLimits,
    behind: super::ClientBehind,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Vec<u8>>,
    /// Bytes in `queue`, plus the line being written.
    queued: usize,
    closed: bool,
    finished: bool,
    close_waker: Option<Waker>,
    /// Why writing failed (kind, OS error number, text); nothing is queued after that.
    failure: Option<(io::ErrorKind, Option<i32>, String)>,
    /// The id of an `initialize` request whose response has not been queued yet.
    awaiting: Option<Value>,
    reading_paused: bool,
    /// The queue went over the live-output budget and is not down to half of it yet.
    behind: bool,
}

impl Shared {
    #[cfg(test)]
    pub(super) fn new(limits: TransportLimits) -> Arc<Shared> {
        Shared::with_flag(limits, super::ClientBehind::default())
    }

    /// Like [`Shared::new`], raising `behind` while the client is behind on reading.
    pub(super) fn with_flag(limits: TransportLimits, behind: super::ClientBehind) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State::default()),
            writer_wake: Notify::new(),
            reader_wake: Notify::new(),
            limits,
            behind,
        })
    }

    /// After the queue shrank: live output flows again once it is down to half the budget.
    fn caught_up(&self, state: &mut State) {
        if state.behind && state.queued <= self.limits.live_output_budget / 2 {
            tracing::warn!("the client caught up: live output flows again");
            state.behind = false;
            self.behind.set(false);
        }
    }

    /// After the queue grew: over the budget, the client is behind.
    fn fell_behind(&self, state: &mut State) {
        if !state.behind && state.queued > self.limits.live_output_budget {
            tracing::warn!(
                queued = state.queued,
                "the client is not reading: no live output until it catches up"
            );
            state.behind = true;
            self.behind.set(true);
        }
    }

    /// Queues a line of the transport's own (an error for a discarded input line): never dropped.
    pub(super) fn push(&self, line: String) {
        let mut state = self.state.lock().unwrap();
        if state.failure.is_none() {
            Self::enqueue(&mut state, line);
            self.writer_wake.notify_one();
        }
    }

    fn enqueue(state: &mut State, line: String) {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        state.queued += bytes.len();
        state.queue.push_back(bytes);
    }

    /// A line from the SDK: always queued (nothing the SDK hands over is dropped).
    fn offer(&self, line: String) {
        let awaiting = {
            let state = self.state.lock().unwrap();
            if state.failure.is_some() {
                return;
            }
            state.awaiting.is_some()
        };
        let line = cap_error_data(line);
        if super::envelope::is_session_update(line.as_bytes()) {
            self.behind.update_arrived();
        }
        let envelope = awaiting.then(|| Envelope::read(line.as_bytes()));
        let mut state = self.state.lock().unwrap();
        if let (Some(envelope), Some(id)) = (&envelope, state.awaiting.as_ref()) {
            if envelope.answers(id) {
                state.awaiting = None;
                self.reader_wake.notify_one();
            }
        }
        Self::enqueue(&mut state, line);
        self.fell_behind(&mut state);
        self.writer_wake.notify_one();
    }

    /// Holds the reader back after an `initialize` request until its response is queued.
    pub(super) fn await_response(&self, id: Value) {
        self.state.lock().unwrap().awaiting = Some(id);
    }

    /// Waits until the reader may take the next line: no `initialize` response is pending, and
    /// the queue is not over [`TransportLimits::pause_reading_at`] (once over it, reading
    /// resumes when the queue is down to half of it).
    pub(super) async fn reading_allowed(&self) {
        loop {
            let woken = self.reader_wake.notified();
            {
                let mut state = self.state.lock().unwrap();
                let limit = self.limits.pause_reading_at;
                if state.queued > limit && !state.reading_paused {
                    tracing::warn!(
                        queued = state.queued,
                        "the client is not reading its answers: no new requests are read until it does"
                    );
                    state.reading_paused = true;
                } else if state.reading_paused && state.queued <= limit / 2 {
                    state.reading_paused = false;
                }
                if state.awaiting.is_none() && !state.reading_paused {
                    return;
                }
            }
            woken.await;
        }
    }

    /// The queued lines, as JSON.
    #[cfg(test)]
    pub(super) fn queued_json(&self) -> Vec<Value> {
        let state = self.state.lock().unwrap();
        state
            .queue
            .iter()
            .map(|line| serde_json::from_slice(line).unwrap())
            .collect()
    }
}

/// The SDK's sink: every line is accepted at once (see the module doc).
pub(super) struct OutgoingSink {
    shared: Arc<Shared>,
}

impl OutgoingSink {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        OutgoingSink { shared }
    }

    fn failure(&self) -> Option<io::Error> {
        let state = self.shared.state.lock().unwrap();
        state.failure.as_ref().map(|(kind, code, text)| match code {
            Some(code) => io::Error::from_raw_os_error(*code),
            None => io::Error::new(*kind, text.clone()),
        })
    }
}

impl futures::Sink<String> for OutgoingSink {
    type Error = io::Error;

    fn poll_ready(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.failure().map_or(Ok(()), Err))
    }

    fn start_send(self: Pin<&mut Self>, line: String) -> io::Result<()> {
        self.shared.offer(line);
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.failure().map_or(Ok(()), Err))
    }

    /// Waits until the writer has written every queued line.
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        {
            let mut state = self.shared.state.lock().unwrap();
            state.closed = true;
            if !state.finished {
                state.close_waker = Some(cx.waker().clone());
                self.shared.writer_wake.notify_one();
                return Poll::Pending;
            }
        }
        Poll::Ready(self.failure().map_or(Ok(()), Err))
    }
}

/// Writes queued lines in order until the sink is closed and the queue is empty, or a write
/// fails (then the queue is emptied, later lines are discarded, and the error is returned).
pub(super) async fn write_lines(
    shared: Arc<Shared>,
    mut writer: impl AsyncWrite + Unpin,
) -> io::Result<()> {
    let result = async {
        loop {
            let woken = shared.writer_wake.notified();
            let next = {
                let mut state = shared.state.lock().unwrap();
                match state.queue.pop_front() {
                    Some(line) => Some(line),
                    None if state.closed => return Ok(()),
                    None => None,
                }
            };
            let Some(line) = next else {
                writer.flush().await?;
                woken.await;
                continue;
            };
            let written = writer.write_all(&line).await;
            {
                let mut state = shared.state.lock().unwrap();
                state.queued -= line.len();
                shared.caught_up(&mut state);
            }
            shared.reader_wake.notify_one();
            written?;
        }
    }
    .await;
    let result = match result {
        Ok(()) => writer.flush().await,
        Err(error) => Err(error),
    };
    let mut state = shared.state.lock().unwrap();
    if let Err(error) = &result {
        tracing::info!(%error, "writing to the client failed");
        state.failure = Some((error.kind(), error.raw_os_error(), error.to_string()));
        state.queue.clear();
        state.queued = 0;
        shared.reader_wake.notify_one();
    }
    state.finished = true;
    if let Some(waker) = state.close_waker.take() {
        waker.wake();
    }
    result
}

/// An error response over [`MAX_ERROR_LINE_BYTES`] (the SDK's invalid-params error quotes the
/// whole `params`) gets its `data` cut: each member over a kilobyte is replaced by a note of its
/// size, so that an error never echoes a whole input back. Other lines are returned unchanged.
pub fn cap_error_data(line: String) -> String {
    if line.len() <= MAX_ERROR_LINE_BYTES {
        return line;
    }
    if super::envelope::has_method(line.as_bytes()) {
        return line;
    }
    let envelope = Envelope::read(line.as_bytes());
    if !envelope.has_error {
        return line;
    }
    let Ok(mut value) = serde_json::from_str::<Value>(&line) else {
        return line;
    };
    if let Some(data) = value.pointer_mut("/error/data") {
        cut_value(data, 1024);
    }
    if let Some(message) = value.pointer_mut("/error/message") {
        cut_value(message, 1024);
    }
    serde_json::to_string(&value).unwrap_or(line)
}

fn cut_value(value: &mut Value, max: usize) {
    if let Value::Object(members) = value {
        for member in members.values_mut() {
            cut_value(member, max);
        }
        return;
    }
    let size = match &*value {
        Value::String(text) => text.len(),
        other => other.to_string().len(),
    };
    if size > max {
        *value = Value::String(format!("[{size} bytes, not echoed]"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits(live_output_budget: usize) -> TransportLimits {
        TransportLimits {
            live_output_budget,
            ..TransportLimits::default()
        }
    }

    /// The connection's budget across cards: updates made but still in the SDK's queues count,
    /// however short the transport's own queue is; each `session/update` line the transport
    /// takes brings one back, and nothing else does.
    #[test]
    fn updates_made_and_not_yet_queued_hold_live_output_back_whatever_the_queue() {
        let shared = Shared::new(limits(usize::MAX));
        let behind = shared.behind.clone();
        for _ in 0..super::super::MAX_UPDATES_IN_FLIGHT {
            assert!(!behind.is_behind());
            behind.update_made();
        }
        assert!(
            behind.is_behind(),
            "the budget is spent while nothing reached the queue"
        );
        shared.offer(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#.into());
        shared.offer(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#.into());
        assert!(behind.is_behind(), "only session/update lines count");
        shared.offer(r#"{"jsonrpc":"2.0","method":"session/update","params":{}}"#.into());
        assert!(!behind.is_behind());
        assert_eq!(
            behind.updates_in_flight(),
            super::super::MAX_UPDATES_IN_FLIGHT - 1
        );
        for _ in 0..super::super::MAX_UPDATES_IN_FLIGHT + 3 {
            shared.offer(r#"{"method":"session/update","params":{"x":1}}"#.into());
        }
        assert_eq!(behind.updates_in_flight(), 0, "never below zero");
    }

    #[test]
    fn over_budget_the_client_is_behind_and_every_line_is_still_queued() {
        let shared = Shared::new(limits(10));
        shared.offer("live 1".into());
        assert!(!shared.behind.is_behind());
        shared.offer("live 2 over".into());
        assert!(
            shared.behind.is_behind(),
            "the agent is told to stop making live output"
        );
        shared.offer("final".into());
        let lines: Vec<_> = {
            let state = shared.state.lock().unwrap();
            state
                .queue
                .iter()
                .map(|l| String::from_utf8_lossy(l).into_owned())
                .collect()
        };
        assert_eq!(lines, ["live 1\n", "live 2 over\n", "final\n"]);
        // Written down to half the budget: live output flows again.
        let mut state = shared.state.lock().unwrap();
        while state.queued > 5 {
            let line = state.queue.pop_front().unwrap();
            state.queued -= line.len();
        }
        shared.caught_up(&mut state);
        assert!(!shared.behind.is_behind());
    }

    #[test]
    fn large_error_data_is_cut_and_the_rest_kept() {
        let params = "x".repeat(50_000);
        let line = json!({"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid params",
            "data":{"error":"missing field `sessionId`","json":{"prompt":params},"phase":"deserialization"}}})
        .to_string();
        let cut: Value = serde_json::from_str(&cap_error_data(line)).unwrap();
        assert_eq!(
            cut,
            json!({"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Invalid params",
                "data":{"error":"missing field `sessionId`","json":{"prompt":"[50000 bytes, not echoed]"},"phase":"deserialization"}}})
        );
        let result =
            json!({"jsonrpc":"2.0","id":3,"result":{"text":"y".repeat(50_000)}}).to_string();
        assert_eq!(cap_error_data(result.clone()), result);
    }

    #[tokio::test]
    async fn the_writer_writes_in_order_and_close_waits_for_it() {
        use futures::SinkExt as _;
        let shared = Shared::new(TransportLimits::default());
        let (mut read_end, write_end) = tokio::io::duplex(16);
        let writer = tokio::spawn(write_lines(shared.clone(), write_end));
        let reader = tokio::spawn(async move {
            let mut all = String::new();
            tokio::io::AsyncReadExt::read_to_string(&mut read_end, &mut all)
                .await
                .unwrap();
            all
        });
        let mut sink = OutgoingSink::new(shared.clone());
        for n in 0..50 {
            sink.send(format!("line {n}")).await.unwrap();
        }
        sink.close().await.unwrap();
        writer.await.unwrap().unwrap();
        let expected: String = (0..50).map(|n| format!("line {n}\n")).collect();
        assert_eq!(reader.await.unwrap(), expected);
        assert_eq!(shared.state.lock().unwrap().queued, 0);
    }
}
