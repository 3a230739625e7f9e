//! The one loop that reads a run's output to its end while watching for a cancel: [`drain`]
//! (and [`super::RunHandle::drain`], which cancels the run itself).
//!
//! Owns: reading every chunk in order, waking the reader on its own deadlines (a batch that must
//! go out, a console view that is due), and running the cancel action once, the first time the
//! token fires, while reading goes on until the output ends (a killed command's last words are
//! still read). Used by [`super::Session::run`], the background jobs' tasks and every tool call
//! on the wire (a turn's call, a job's card). Must not touch: what a reader does with a chunk,
//! how a run is cancelled (the caller's `on_cancel`).

use std::time::Instant;

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

/// One piece of a run's live output, in order: the command's output, or a notice of acp-bash's
/// own about the run (what its mode does not enforce here, a host it blocked, a variable it
/// could not keep). A holder that shows notices where it shows output writes them as
/// [`notice_line`] does (what [`DrainReader::notice`] does unless the reader says otherwise);
/// one that has a channel of its own for them (a CLI's stderr) keeps them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutputEvent {
    /// A chunk of the command's output (valid UTF-8, never cut inside a character or an escape
    /// sequence).
    Output(String),
    /// A notice of acp-bash's own (its text, without the `[acp-bash: …]` around it).
    Notice(String),
}

impl OutputEvent {
    /// The text as it shows among the output: a notice as its own line, [`notice_line`].
    pub fn into_text(self) -> String {
        match self {
            OutputEvent::Output(chunk) => chunk,
            OutputEvent::Notice(text) => notice_line(&text),
        }
    }
}

impl From<String> for OutputEvent {
    fn from(chunk: String) -> Self {
        OutputEvent::Output(chunk)
    }
}

/// A notice as the output shows it (and as the run's outcome keeps it): `[acp-bash: TEXT]` on a
/// line of its own.
pub fn notice_line(text: &str) -> String {
    format!("[acp-bash: {text}]\n")
}

/// What [`drain`] feeds: each chunk as it comes, and a wake-up at the reader's deadline.
pub trait DrainReader {
    /// One chunk of output (valid UTF-8, never cut inside a character or an escape sequence).
    fn chunk(&mut self, chunk: String);

    /// A notice of acp-bash's own, in its place among the chunks; by default shown among them
    /// as [`notice_line`].
    fn notice(&mut self, text: String) {
        self.chunk(notice_line(&text));
    }

    /// When the reader wants to be woken without a new chunk (`None`: only by chunks).
    fn deadline(&self) -> Option<Instant> {
        None
    }

    /// The deadline passed (`now` is the time it was noticed).
    fn due(&mut self, _now: Instant) {}
}

/// A reader without deadlines: every chunk to the closure.
impl<F: FnMut(String)> DrainReader for F {
    fn chunk(&mut self, chunk: String) {
        self(chunk)
    }
}

/// Reads `output` (chunks, or [`OutputEvent`]s with notices apart) until it ends, feeding
/// `reader` (and waking it on its deadlines); the first time `cancel` fires, `on_cancel` runs,
/// and reading goes on until the output ends.
pub async fn drain<S>(
    output: &mut S,
    reader: &mut (dyn DrainReader + Send),
    cancel: &CancellationToken,
    on_cancel: impl FnOnce(),
) where
    S: Stream + Unpin + ?Sized,
    S::Item: Into<OutputEvent>,
{
    let mut on_cancel = Some(on_cancel);
    loop {
        let deadline = reader.deadline();
        tokio::select! {
            event = output.next() => match event.map(Into::into) {
                Some(OutputEvent::Output(chunk)) => reader.chunk(chunk),
                Some(OutputEvent::Notice(text)) => reader.notice(text),
                None => break,
            },
            () = sleep_until(deadline), if deadline.is_some() => reader.due(Instant::now()),
            () = cancel.cancelled(), if on_cancel.is_some() => {
                if let Some(on_cancel) = on_cancel.take() {
                    on_cancel();
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}
