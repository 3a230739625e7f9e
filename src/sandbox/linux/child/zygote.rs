//! Starting the session's zygote (see `super::super::zygote`): from the fork to the exec of the
//! agent's own binary under the zygote's hidden argv[0], with an empty environment, stdin and
//! stdout on `/dev/null`, and the request socket as fd 3. Async-signal-safe only: raw syscalls on
//! data the parent prepared.
#![deny(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::ffi::CString;
use std::os::fd::RawFd;

use super::sys::{close_from, reset_signals};

/// What the zygote's exec needs, prepared in the parent.
pub(crate) struct ZygoteExec {
    pub program: CString,
    /// `[argv0, protocol, NULL]`.
    pub argv: [*const libc::c_char; 3],
    /// The socket end the zygote reads requests from (becomes fd 3).
    pub socket: RawFd,
    /// `/dev/null`, opened read-write.
    pub null: RawFd,
    /// The agent's pid: the zygote is not started if the agent is already gone.
    pub parent: libc::pid_t,
}

/// The fork's program. Never returns.
pub(crate) fn exec(args: &ZygoteExec) -> ! {
    reset_signals();
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    // SAFETY: raw syscalls on fds and strings the parent prepared.
    unsafe {
        // Tied to the spawner thread, which lives as long as the agent.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != args.parent {
            libc::_exit(127);
        }
        // Out of the agent's session and process group: the engine's signals to a command's
        // group, or the terminal's, never reach the zygote.
        libc::setsid();
        if libc::dup2(args.null, 0) < 0 || libc::dup2(args.null, 1) < 0 {
            libc::_exit(127);
        }
        if args.socket == 3 {
            libc::fcntl(3, libc::F_SETFD, 0);
        } else if libc::dup2(args.socket, 3) < 0 {
            libc::_exit(127);
        }
        // stderr stays (the agent's log stream); everything else closes at exec.
        close_from(4, false);
        libc::execve(args.program.as_ptr(), args.argv.as_ptr(), envp.as_ptr());
        libc::_exit(127)
    }
}
