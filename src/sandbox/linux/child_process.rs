//! Waiting for the process [`crate::sandbox::spawn`] started: through a pidfd (Linux 5.3+), or
//! on a blocking thread where pidfds are not available. A handle dropped before the exit still
//! reaps it, so no zombie is left.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;

use tokio::io::unix::AsyncFd;

/// A child started by `sandbox::spawn`, waited for through a pidfd (Linux 5.3+), or on a
/// blocking thread where pidfds are not available.
pub(crate) struct SpawnedChild {
    pid: libc::pid_t,
    waiter: Waiter,
    reaped: bool,
}

enum Waiter {
    PidFd(AsyncFd<OwnedFd>),
    Thread(tokio::task::JoinHandle<io::Result<std::process::ExitStatus>>),
    /// Started by the session's zygote (not our child): W writes the shell's wait status here
    /// before it exits (the zygote reaps it). EOF without one: W was killed (SIGKILL).
    Reported(tokio::net::unix::pipe::Receiver),
}

impl SpawnedChild {
    pub(crate) fn new(pid: libc::pid_t) -> io::Result<SpawnedChild> {
        // SAFETY: pidfd_open has no memory-safety preconditions.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
        let waiter = if fd >= 0 {
            // SAFETY: a new fd we own; the AsyncFd owns it from here on and nothing else
            // closes or replaces it.
            let registered = unsafe {
                let fd = OwnedFd::from_raw_fd(fd);
                AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
            };
            Waiter::PidFd(registered?)
        } else {
            Waiter::Thread(tokio::task::spawn_blocking(move || loop {
                let mut status = 0;
                // SAFETY: waitpid on our own child.
                let reaped = unsafe { libc::waitpid(pid, &mut status, 0) };
                if reaped == pid {
                    return Ok(std::process::ExitStatus::from_raw(status));
                }
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }))
        };
        Ok(SpawnedChild {
            pid,
            waiter,
            reaped: false,
        })
    }

    /// A child of the session's zygote, whose status comes on `status`.
    pub(crate) fn reported(pid: libc::pid_t, status: OwnedFd) -> io::Result<SpawnedChild> {
        let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(status)?;
        Ok(SpawnedChild {
            pid,
            waiter: Waiter::Reported(receiver),
            reaped: false,
        })
    }

    /// The process waited for.
    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    pub(crate) async fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        let status = match &mut self.waiter {
            Waiter::Reported(receiver) => {
                use tokio::io::AsyncReadExt;
                let mut word = [0u8; 4];
                let mut got = 0;
                while got < 4 {
                    match receiver.read(&mut word[got..]).await {
                        Ok(0) => break,
                        Ok(n) => got += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                let raw = if got == 4 {
                    libc::c_int::from_ne_bytes(word)
                } else {
                    libc::SIGKILL // W died before it could report: killed
                };
                Ok(std::process::ExitStatus::from_raw(raw))
            }
            Waiter::PidFd(fd) => loop {
                let mut ready = fd.readable().await?;
                let mut status = 0;
                // SAFETY: waitpid on our own child.
                let reaped = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
                if reaped == self.pid {
                    break Ok(std::process::ExitStatus::from_raw(status));
                }
                if reaped == 0 {
                    ready.clear_ready();
                    continue;
                }
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    break Err(error);
                }
            },
            Waiter::Thread(handle) => match handle.await {
                Ok(result) => result,
                Err(error) => Err(io::Error::other(error)),
            },
        };
        self.reaped = true;
        status
    }
}

impl Drop for SpawnedChild {
    /// A run dropped before its shell was reaped: reap it when it exits (no zombie left),
    /// as tokio does for its own children.
    fn drop(&mut self) {
        if self.reaped || matches!(self.waiter, Waiter::Thread(_) | Waiter::Reported(_)) {
            return;
        }
        let pid = self.pid;
        std::thread::spawn(move || {
            let mut status = 0;
            // SAFETY: waitpid on our own child.
            while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
                && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
            {}
        });
    }
}
