//! The agent's stdin/stdout transport: the SDK's line protocol over the process's own pipes,
//! read and written by the async runtime itself.
//!
//! Owns: choosing how stdin/stdout are driven. Must not touch: what goes over them.
//!
//! The SDK's [`agent_client_protocol::Stdio`] reads and writes through the `blocking` crate:
//! every read and every write is handed to a helper thread and back, which costs about 0.4 ms
//! per request/response round trip on a 2-core machine (`notes/2026-11-29-stdio-transport.md`).
//! When stdin and stdout are pipes or sockets (an editor launching the agent), [`StdioPipes`]
//! registers them with the runtime's poller instead (non-blocking, no thread hop). Anything
//! else (a terminal, a file) keeps the SDK's transport.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use agent_client_protocol::role::Role;
use agent_client_protocol::{ByteStreams, ConnectTo};
use tokio::io::Interest;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// The transport for an agent on this process's stdin/stdout: [`StdioPipes`] when both are
/// pipes or sockets, the SDK's `Stdio` otherwise.
pub enum AgentStdio {
    /// stdin and stdout are pipes or sockets, polled by the runtime.
    Pipes(StdioPipes),
    /// Anything else: the SDK's transport.
    Sdk(agent_client_protocol::Stdio),
}

impl AgentStdio {
    /// The transport for this process's stdin/stdout.
    pub fn new() -> AgentStdio {
        match StdioPipes::new() {
            Ok(pipes) => AgentStdio::Pipes(pipes),
            Err(why) => {
                tracing::debug!(%why, "stdin/stdout through the SDK's blocking transport");
                AgentStdio::Sdk(agent_client_protocol::Stdio::new())
            }
        }
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
        match self {
            AgentStdio::Pipes(pipes) => ConnectTo::<R>::connect_to(pipes, client).await,
            AgentStdio::Sdk(stdio) => ConnectTo::<R>::connect_to(stdio, client).await,
        }
    }
}

/// Stdin and stdout (both pipes or sockets), duplicated and set non-blocking for the runtime.
/// Dropping it puts them back in blocking mode.
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

impl<R: Role> ConnectTo<R> for StdioPipes {
    async fn connect_to(
        self,
        client: impl ConnectTo<R::Counterpart>,
    ) -> agent_client_protocol::Result<()> {
        let _restore = RestoreBlocking([0, 1]);
        let incoming = AsyncFd::new(self.stdin, Interest::READABLE).map_err(io_error)?;
        let outgoing = AsyncFd::new(self.stdout, Interest::WRITABLE).map_err(io_error)?;
        ConnectTo::<R>::connect_to(
            ByteStreams::new(outgoing.compat_write(), incoming.compat()),
            client,
        )
        .await
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
            let unfilled = buf.initialize_unfilled();
            let result = guard.try_io(|fd| {
                // SAFETY: reads into the initialized, unfilled part of `buf`.
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
