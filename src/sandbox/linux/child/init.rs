//! I, PID 1 of the command's PID namespace: reaps everything; when the shell exits, hands its
//! status to W, lingers while the command's other processes run (at most [`LINGER`]), then
//! exits, which makes the kernel kill whatever is left. Async-signal-safe only.
#![deny(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::os::fd::RawFd;

use libc::c_int;

use super::sys::{close_all_but, errno, monotonic_ms, sleep_ms, write_all, SETUP_FAILED};

/// How long PID 1 keeps the namespace alive after the shell exits while other processes of
/// the command still run, so output a background job prints just after the shell ends is not
/// lost. The engine normally ends this sooner: after its own pipe grace it SIGKILLs the
/// process group, PID 1 included.
pub(crate) const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// Who I's parent is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Parent {
    /// W (a command the agent spawned itself), which exits as soon as it has the status.
    Waiter,
    /// The session's zygote, which outlives the command: I reports to the agent directly.
    Zygote,
}

/// Never returns.
pub(crate) fn run(
    shell: libc::pid_t,
    status_write: RawFd,
    env_region: Option<(usize, usize)>,
    parent: Parent,
) -> ! {
    close_all_but(status_write);
    // SAFETY: closing I's stdio, which it never uses: the output's end comes with the shell's
    // exit (and its background jobs'), not only once I has handed over the status.
    unsafe {
        for fd in 0..3 {
            libc::close(fd);
        }
    }
    // SAFETY: raw syscalls; the wiped range is this process's own copy of the agent's
    // environment block (the kernel serves /proc/1/environ from it).
    unsafe {
        if let Some((start, end)) = env_region {
            if end > start {
                std::ptr::write_bytes(start as *mut u8, 0, end - start);
            }
        }
        let mut status: c_int = 0;
        loop {
            let r = libc::waitpid(-1, &mut status, 0);
            if r == shell {
                break;
            }
            if r < 0 && errno() != libc::EINTR {
                libc::_exit(SETUP_FAILED);
            }
        }
        if parent == Parent::Waiter {
            // W exits as soon as it has the status: don't die with it. (The zygote's death is
            // the session's: then the lingering processes go too.)
            libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0);
        }
        write_all(status_write, &status.to_ne_bytes());
        libc::close(status_write);
        let deadline = monotonic_ms() + LINGER.as_millis() as i64;
        loop {
            let r = libc::waitpid(-1, &mut status, libc::WNOHANG);
            if r > 0 || (r < 0 && errno() == libc::EINTR) {
                continue;
            }
            if r < 0 || monotonic_ms() >= deadline {
                libc::_exit(0); // no one left (ECHILD), or time is up
            }
            sleep_ms(5);
        }
    }
}
