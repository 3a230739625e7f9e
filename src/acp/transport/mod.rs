//! The agent's stdin/stdout transport: newline-delimited JSON-RPC over the process's own pipes,
//! read and written by the async runtime itself, with bounds on what comes in and what waits to
//! go out.
//!
//! Owns: choosing how stdin/stdout are driven, and the line framing ([`LineTransport`]: the
//! limits and rules of `incoming` and `outgoing`). Must not touch: what the messages mean (the
//! SDK and the agent).
//!
//! The SDK's [`agent_client_protocol::Stdio`] reads and writes through the `blocking` crate:
//! every read and every write is handed to a helper thread and back, which costs about 0.4 ms
//! per request/response round trip on a 2-core machine (`notes/2026-11-29-stdio-transport.md`).
//! When stdin and stdout are pipes or sockets (an editor launching the agent), [`StdioPipes`]
//! registers them with the runtime's poller instead (non-blocking, no thread hop). Anything
//! else (a terminal, a file) goes through tokio's stdin/stdout. Either way the lines go through
//! [`LineTransport`], not the SDK's line reader, which ends the whole connection on a line that
//! is not UTF-8 and buffers a line of any length (`notes/2026-11-30-input-bounds.md`).

mod envelope;
mod incoming;
mod outgoing;

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use agent_client_protocol::role::Role;
use agent_client_protocol::{ConnectTo, Lines};
use tokio::io::{AsyncRead, AsyncWrite, Interest};

pub use outgoing::{cap_error_data, MAX_ERROR_LINE_BYTES};

/// The bounds of a [`LineTransport`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TransportLimits {
    /// A line longer than this is discarded as it streams in and answered with an error
    /// (default: [`TransportLimits::for_prompts`] of 1 MiB, i.e. 9 MiB).
    pub max_line_bytes: usize,
    /// The prompt limit the agent applies, named in the error for a line that is too long.
    pub max_prompt_bytes: usize,
    /// The room a line has for a prompt's images beyond that ([`Self::with_image_room`]; 0:
    /// none), named in the error too.
    pub image_bytes: usize,
    /// Once this much waits to be written, the client is behind ([`ClientBehind`]: an agent that
    /// holds the flag makes no live output) until the queue is down to half of it (4 MiB). The
    /// transport itself drops nothing: what may be left out is known where an update is made
    /// ([`crate::acp::call_wire`]), not by reading lines back.
    pub live_output_budget: usize,
    /// Once this much waits to be written, no more input is read until the queue is down to
    /// half of it (16 MiB): a client that sends requests without reading the answers is slowed
    /// down instead of growing the agent.
    pub pause_reading_at: usize,
}

impl TransportLimits {
    /// Limits for an agent that accepts prompts of up to `max_prompt_bytes`: a line may be
    /// eight times that (a prompt's JSON escapes take up to six bytes per byte) plus 1 MiB for
    /// the rest of the message.
    pub fn for_prompts(max_prompt_bytes: usize) -> TransportLimits {
        TransportLimits {
            max_line_bytes: max_prompt_bytes.saturating_mul(8).saturating_add(1 << 20),
            max_prompt_bytes,
            image_bytes: 0,
            live_output_budget: 4 << 20,
            pause_reading_at: 16 << 20,
        }
    }
}

impl TransportLimits {
    /// These limits with room for `image_bytes` of a prompt's images (base64, which JSON never
    /// escapes) on its line, beyond its text: for an agent whose driver takes images, so that a
    /// prompt with more images than it sends is answered by naming them, not refused whole.
    pub fn with_image_room(mut self, image_bytes: usize) -> TransportLimits {
        self.max_line_bytes = self.max_line_bytes.saturating_add(image_bytes);
        self.image_bytes = image_bytes;
        self
    }
}

impl Default for TransportLimits {
    fn default() -> Self {
        TransportLimits::for_prompts(crate::acp::DEFAULT_MAX_PROMPT_BYTES)
    }
}

/// Whether the client is behind on reading: set by a [`LineTransport`] once its queue went over
/// [`TransportLimits::live_output_budget`], cleared once the queue is down to half of it; and
/// also while [`MAX_UPDATES_IN_FLIGHT`] updates made for the connection
/// ([`ClientBehind::update_made`]) have not reached the transport's queue yet. An agent that
/// holds a clone makes no live output meanwhile (a call's sequencer asks its sink,
/// [`crate::acp::UpdateSink::live_wanted`]); nothing else it sends is ever dropped.
///
/// The second half is the connection's one budget across its cards (issue 20 point 9): between
/// a sink and this transport, each update waits in the SDK's own unbounded queues until the
/// SDK's tasks get the runtime's one worker, which under load lags behind the sequencers of
/// many stalled cards; the transport's queue then looked short while updates piled up unseen
/// (one flood test grew 105 MiB once under load, 31-41 MiB alone). Counting them where they
/// are made bounds the live output in flight to `MAX_UPDATES_IN_FLIGHT` updates of at most
/// one batch each ([`crate::present::stream::StreamLimits::max_batch_bytes`]), whatever the
/// load.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ClientBehind(Arc<BehindState>);

#[derive(Debug, Default)]
struct BehindState {
    /// The transport's queue went over the live-output budget and is not down to half of it.
    queue_full: AtomicBool,
    /// Updates made (through a sink that counts) and not yet in the transport's queue.
    in_flight: AtomicUsize,
}

/// How many updates a connection may have made but not yet queued for writing before its live
/// output stops ([`ClientBehind`]): 32 batches of at most 64 KiB of text each.
pub const MAX_UPDATES_IN_FLIGHT: usize = 32;

impl ClientBehind {
    /// Whether the client is behind right now: the transport's queue is over its budget, or
    /// [`MAX_UPDATES_IN_FLIGHT`] updates have not reached it yet.
    pub fn is_behind(&self) -> bool {
        self.0.queue_full.load(Ordering::Relaxed)
            || self.updates_in_flight() >= MAX_UPDATES_IN_FLIGHT
    }

    /// Counts one `session/update` notification made for this connection (call it just before
    /// handing the update to the SDK): in flight until the transport queues its line.
    pub fn update_made(&self) {
        self.0.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// One update made with [`Self::update_made`] is no longer on its way (the transport
    /// queued it, or the SDK refused it). Never below zero: updates made by a sink that does
    /// not count are queued too.
    pub fn update_arrived(&self) {
        let _ = self
            .0
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Updates made and not yet queued by the transport.
    pub fn updates_in_flight(&self) -> usize {
        self.0.in_flight.load(Ordering::Relaxed)
    }

    fn set(&self, behind: bool) {
        self.0.queue_full.store(behind, Ordering::Relaxed);
    }
}

/// Newline-delimited JSON-RPC over any byte streams, with the bounds of [`TransportLimits`]:
/// what the SDK's `ByteStreams` does, minus its failure modes (see the module doc).
#[non_exhaustive]
pub struct LineTransport<R, W> {
    reader: R,
    writer: W,
    limits: TransportLimits,
    behind: ClientBehind,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport that reads lines from `reader` and writes them to `writer`, within `limits`.
    pub fn new(reader: R, writer: W, limits: TransportLimits) -> Self {
        LineTransport {
            reader,
            writer,
            limits,
            behind: ClientBehind::default(),
        }
    }

    /// The flag this transport sets while the client is behind.
    pub fn client_behind(&self) -> ClientBehind {
        self.behind.clone()
    }
}

impl<Rl: Role, R, W> ConnectTo<Rl> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    async fn connect_to(
        self,
        client: impl ConnectTo<Rl::Counterpart>,
    ) -> agent_client_protocol::Result<()> {
        let shared = outgoing::Shared::with_flag(self.limits.clone(), self.behind);
        let incoming =
            incoming::LineReader::new(self.reader, shared.clone(), self.limits).into_stream();
        let sink = outgoing::OutgoingSink::new(shared.clone());
        let connection = ConnectTo::<Rl>::connect_to(Lines::new(sink, Box::pin(incoming)), client);
        let writing = outgoing::write_lines(shared, self.writer);
        let (connection, writing) = (std::pin::pin!(connection), std::pin::pin!(writing));
        match futures::future::select(connection, writing).await {
            futures::future::Either::Left((result, _)) => result,
            // Writing failed (the client closed its end): the connection ends now, with the
            // error, even if the SDK has nothing more to send (a broken pipe is then treated
            // like EOF by the agent).
            futures::future::Either::Right((Err(error), _)) => {
                Err(agent_client_protocol::Error::into_internal_error(error))
            }
            futures::future::Either::Right((Ok(()), connection)) => connection.await,
        }
    }
}

/// The transport for an agent on this process's stdin/stdout: [`StdioPipes`] when both are
/// pipes or sockets, tokio's stdin/stdout otherwise, each through a [`LineTransport`].
#[non_exhaustive]
pub struct AgentStdio {
    limits: TransportLimits,
    behind: ClientBehind,
}

impl AgentStdio {
    /// The stdio transport with the default [`TransportLimits`].
    pub fn new() -> AgentStdio {
        AgentStdio {
            limits: TransportLimits::default(),
            behind: ClientBehind::default(),
        }
    }

    /// The flag the transport sets while the client is behind on reading (for
    /// [`crate::acp::AcpBashAgent::with_client_behind`]).
    pub fn client_behind(&self) -> ClientBehind {
        self.behind.clone()
    }

    /// Changes the bounds (the defaults go with the agent's default prompt limit).
    pub fn limits(mut self, limits: TransportLimits) -> AgentStdio {
        self.limits = limits;
        self
    }
}

impl Default for AgentStdio {
    fn default() -> Self {
        AgentStdio::new()
    }
}

impl<R: Role> ConnectTo<R> for AgentStdio {
    async fn connect_to(
        self,
        client: impl ConnectTo<R::Counterpart>,
    ) -> agent_client_protocol::Result<()> {
        match StdioPipes::new() {
            Ok(pipes) => {
                let _restore = RestoreBlocking([0, 1]);
                let incoming = AsyncFd::new(pipes.stdin, Interest::READABLE).map_err(io_error)?;
                let outgoing = AsyncFd::new(pipes.stdout, Interest::WRITABLE).map_err(io_error)?;
                let mut transport = LineTransport::new(incoming, outgoing, self.limits);
                transport.behind = self.behind;
                ConnectTo::<R>::connect_to(transport, client).await
            }
            Err(why) => {
                tracing::debug!(%why, "stdin/stdout through tokio's blocking stdio");
                let mut transport =
                    LineTransport::new(tokio::io::stdin(), tokio::io::stdout(), self.limits);
                transport.behind = self.behind;
                ConnectTo::<R>::connect_to(transport, client).await
            }
        }
    }
}

/// Stdin and stdout (both pipes or sockets), duplicated and set non-blocking for the runtime.
/// Dropping it puts them back in blocking mode.
#[non_exhaustive]
pub struct StdioPipes {
    stdin: OwnedFd,
    stdout: OwnedFd,
}

impl StdioPipes {
    /// Fails (with the reason) when stdin or stdout is not a pipe or a socket.
    pub fn new() -> std::io::Result<StdioPipes> {
        // SAFETY: fds 0 and 1 stay open for the life of the process; we only duplicate them.
        let (stdin, stdout) = unsafe { (BorrowedFd::borrow_raw(0), BorrowedFd::borrow_raw(1)) };
        for (name, fd) in [("stdin", stdin), ("stdout", stdout)] {
            if !is_pipe_or_socket(fd)? {
                return Err(std::io::Error::other(format!(
                    "{name} is not a pipe or a socket"
                )));
            }
        }
        Ok(StdioPipes {
            stdin: stdin.try_clone_to_owned()?,
            stdout: stdout.try_clone_to_owned()?,
        })
    }
}

fn io_error(error: std::io::Error) -> agent_client_protocol::Error {
    agent_client_protocol::Error::internal_error().data(error.to_string())
}

fn is_pipe_or_socket(fd: BorrowedFd<'_>) -> std::io::Result<bool> {
    // SAFETY: fstat writes into the zeroed struct we pass.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let kind = stat.st_mode & libc::S_IFMT;
    Ok(kind == libc::S_IFIFO || kind == libc::S_IFSOCK)
}

fn set_nonblocking(fd: libc::c_int, on: bool) -> std::io::Result<()> {
    // SAFETY: fcntl on an fd we hold; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let flags = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        if libc::fcntl(fd, libc::F_SETFL, flags) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Clears `O_NONBLOCK` again when the connection ends, through fds 0 and 1 (the flag belongs to
/// the open pipe, which they share with our duplicates and maybe with the launching process).
struct RestoreBlocking([libc::c_int; 2]);

impl Drop for RestoreBlocking {
    fn drop(&mut self) {
        for fd in self.0 {
            let _ = set_nonblocking(fd, false);
        }
    }
}

/// One end of a pipe or socket, polled by the runtime: reads and writes never block a thread.
struct AsyncFd {
    inner: tokio::io::unix::AsyncFd<OwnedFd>,
}

impl AsyncFd {
    fn new(fd: OwnedFd, interest: Interest) -> std::io::Result<AsyncFd> {
        set_nonblocking(fd.as_raw_fd(), true)?;
        // SAFETY: the `OwnedFd` moves into the `AsyncFd`, which alone closes it, on drop.
        let inner = unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, interest) };
        Ok(AsyncFd {
            inner: inner.map_err(std::io::Error::from)?,
        })
    }
}

impl tokio::io::AsyncRead for AsyncFd {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        loop {
            let mut guard = std::task::ready!(self.inner.poll_read_ready(cx))?;
            // Not `initialize_unfilled`: zeroing the caller's spare capacity before every read
            // is work (64 KiB a read) that read(2) overwrites anyway.
            // SAFETY: only read(2) writes to it, and only its first `n` bytes are then marked
            // initialized.
            let unfilled = unsafe { buf.unfilled_mut() };
            let result = guard.try_io(|fd| {
                // SAFETY: reads into the unfilled part of `buf`, at most its length.
                let n = unsafe {
                    libc::read(fd.as_raw_fd(), unfilled.as_mut_ptr().cast(), unfilled.len())
                };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match result {
                Ok(Ok(n)) => {
                    // SAFETY: read(2) wrote these `n` bytes.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    return std::task::Poll::Ready(Ok(()));
                }
                Ok(Err(error)) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Ok(Err(error)) => return std::task::Poll::Ready(Err(error)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl tokio::io::AsyncWrite for AsyncFd {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bytes: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        loop {
            let mut guard = std::task::ready!(self.inner.poll_write_ready(cx))?;
            let result = guard.try_io(|fd| {
                // SAFETY: writes from a live slice.
                let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            });
            match result {
                Ok(Ok(n)) => return std::task::Poll::Ready(Ok(n)),
                Ok(Err(error)) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Ok(Err(error)) => return std::task::Poll::Ready(Err(error)),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
