//! Linux: the tunnel's bytes moved between the two sockets by the kernel (`splice(2)` through a
//! pipe per direction), never copied through the proxy's memory. A download through the proxy
//! then costs the kernel's page moves instead of two more copies, which on a loaded or small
//! machine decides whether the proxy keeps up with a direct download (`benches/agent/network.rs`,
//! `notes/benchmarks.md`). Semantics are those of `tokio::io::copy_bidirectional`: each
//! direction runs until its source ends, then shuts the other side's writing half; an error in
//! either direction ends both.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use tokio::io::Interest;
use tokio::net::TcpStream;

/// The most one `splice` moves: the pipe's size, asked for at creation (the kernel may give
/// less; a short move is handled like any other).
const PIPE_BYTES: usize = 1 << 20;

/// Moves bytes both ways between `a` and `b` until both directions have ended.
pub(super) async fn copy_both(a: &TcpStream, b: &TcpStream) -> io::Result<()> {
    tokio::try_join!(one_way(a, b), one_way(b, a)).map(|_| ())
}

/// `from`'s bytes to `to` until `from` ends; then `to`'s writing half is shut.
async fn one_way(from: &TcpStream, to: &TcpStream) -> io::Result<()> {
    let (read_end, write_end) = pipe()?;
    loop {
        // The pipe is empty here: a would-block can only be the socket's.
        let moved = from
            .async_io(Interest::READABLE, || {
                splice(from.as_raw_fd(), write_end.as_raw_fd(), PIPE_BYTES)
            })
            .await?;
        if moved == 0 {
            return shut_writing(to);
        }
        let mut left = moved;
        while left > 0 {
            // The pipe holds `left` bytes: a would-block can only be the socket's.
            let sent = to
                .async_io(Interest::WRITABLE, || {
                    splice(read_end.as_raw_fd(), to.as_raw_fd(), left)
                })
                .await?;
            if sent == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            left -= sent;
        }
    }
}

fn shut_writing(socket: &TcpStream) -> io::Result<()> {
    // SAFETY: shutdown(2) of a socket this stream owns; it stays open.
    if unsafe { libc::shutdown(socket.as_raw_fd(), libc::SHUT_WR) } == 0 {
        return Ok(());
    }
    match io::Error::last_os_error() {
        // The peer is already gone: nothing more to tell it.
        error if error.raw_os_error() == Some(libc::ENOTCONN) => Ok(()),
        error => Err(error),
    }
}

/// A non-blocking pipe (read end, write end), as large as the kernel allows up to `PIPE_BYTES`.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2(2) fills the two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and are owned by nothing else.
    let ends = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // A larger pipe moves more per call; the default (64 KiB) still works.
    // SAFETY: fcntl(2) on a descriptor we own.
    unsafe {
        libc::fcntl(
            ends.1.as_raw_fd(),
            libc::F_SETPIPE_SZ,
            PIPE_BYTES as libc::c_int,
        )
    };
    Ok(ends)
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    // SAFETY: splice(2) between two descriptors the caller keeps open, no offsets.
    let moved = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            len,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if moved < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(moved as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A pair of connected loopback sockets.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (a, b) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (a.unwrap(), b.unwrap().0)
    }

    /// Oracle: the bytes each end reads are exactly the bytes the other wrote (16 MiB one way
    /// with a pattern that shifts, 1 MiB the other way), and each side sees the other's end of
    /// writing (EOF) after all of them, while its own direction is still open (a half-close
    /// passes through). Planted "a short move is not retried" and "no shutdown at the end":
    /// each failed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn both_directions_arrive_whole_and_in_order_then_end() {
        // A lost end of writing would leave a side waiting for EOF forever.
        tokio::time::timeout(std::time::Duration::from_secs(120), exchange())
            .await
            .expect("both sides saw the other's end within two minutes");
    }

    async fn exchange() {
        let (mut client, proxy_client_side) = pair().await;
        let (proxy_host_side, mut host) = pair().await;
        let proxy =
            tokio::spawn(async move { copy_both(&proxy_client_side, &proxy_host_side).await });
        let down: Vec<u8> = (0..16 << 20).map(|i: u32| (i % 251) as u8).collect();
        let up: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 241) as u8).collect();
        let (down2, up2) = (down.clone(), up.clone());
        let host_side = tokio::spawn(async move {
            host.write_all(&down2).await.unwrap();
            host.shutdown().await.unwrap();
            let mut got = Vec::new();
            host.read_to_end(&mut got).await.unwrap();
            assert!(
                got == up2,
                "the host got {} bytes, not the client's",
                got.len()
            );
        });
        // The client reads to the host's end before it writes anything: the host's end of
        // writing must reach it while the client's own direction is still open.
        let mut read = Vec::new();
        client.read_to_end(&mut read).await.unwrap();
        assert!(
            read == down,
            "the client got {} bytes, not the host's",
            read.len()
        );
        client.write_all(&up).await.unwrap();
        client.shutdown().await.unwrap();
        host_side.await.unwrap();
        proxy.await.unwrap().unwrap();
    }
}
