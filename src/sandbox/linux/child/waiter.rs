//! W, the process the engine spawned: waits for the shell's status from the namespace's init and
//! exits the same way. Async-signal-safe only.
#![deny(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::os::fd::RawFd;

use libc::c_int;

use super::sys::{close_all_but, close_all_except, errno, exit_like, write_all, SETUP_FAILED};

/// Signals the engine sends to the whole process group: W ignores them (the shell, in the same
/// group, gets them directly) so that W lives to report how the shell ended.
pub(crate) const GROUP_SIGNALS: [c_int; 7] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
];

/// Waits for the shell's status from PID 1 (`init`), then exits the same way, after writing
/// it to `report` (-1: nowhere; a zygote's fork reports there, see `ExecArgs::status_fd`).
/// Never returns.
pub(crate) fn run(init: libc::pid_t, status_read: RawFd, report: RawFd) -> ! {
    if report >= 0 {
        let mut keep = [status_read.min(report), status_read.max(report)];
        close_all_except(&mut keep);
    } else {
        close_all_but(status_read);
    }
    // SAFETY: raw syscalls only.
    unsafe {
        for sig in GROUP_SIGNALS {
            super::sys::set_disposition(sig, libc::SIG_IGN);
        }
        // The shell's own status, written by PID 1 when the shell ends (PID 1 may outlive it
        // briefly, see LINGER, and cannot die of most signals itself).
        let mut shell = [0u8; 4];
        let mut got = 0usize;
        while got < 4 {
            let rest = shell.get_mut(got..).unwrap_or_default();
            let n = libc::read(status_read, rest.as_mut_ptr().cast(), rest.len());
            if n > 0 {
                got += n as usize;
            } else if n < 0 && errno() == libc::EINTR {
                continue;
            } else {
                break;
            }
        }
        if got == 4 {
            let status = c_int::from_ne_bytes(shell);
            report_status(report, status);
            exit_like(status);
        }
        // PID 1 ended before the shell did (killed, or a setup step failed): report that.
        let mut status: c_int = 0;
        loop {
            let r = libc::waitpid(init, &mut status, 0);
            if r == init {
                report_status(report, status);
                exit_like(status);
            }
            if r < 0 && errno() != libc::EINTR {
                libc::_exit(SETUP_FAILED);
            }
        }
    }
}

/// Writes the shell's wait status to `report` (-1: nowhere).
fn report_status(report: RawFd, status: c_int) {
    if report >= 0 {
        write_all(report, &status.to_ne_bytes());
    }
}
