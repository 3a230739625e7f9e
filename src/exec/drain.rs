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

/// What [`drain`] feeds: each chunk as it comes, and a wake-up at the reader's deadline.
pub trait DrainReader {
    /// One chunk of output (valid UTF-8, never cut inside a character or an escape sequence).
    fn chunk(&mut self, chunk: String);

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

/// Reads `output` until it ends, feeding `reader` (and waking it on its deadlines); the first
/// time `cancel` fires, `on_cancel` runs, and reading goes on until the output ends.
pub async fn drain<S>(
    output: &mut S,
    reader: &mut (dyn DrainReader + Send),
    cancel: &CancellationToken,
    on_cancel: impl FnOnce(),
) where
    S: Stream<Item = String> + Unpin + ?Sized,
{
    let mut on_cancel = Some(on_cancel);
    loop {
        let deadline = reader.deadline();
        tokio::select! {
            chunk = output.next() => match chunk {
                Some(chunk) => reader.chunk(chunk),
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
