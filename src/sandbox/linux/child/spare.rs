//! A spare PID 1 (`super::super::zygote`): the session's zygote clones the next command's I
//! into its own PID namespace and copy of the mount namespace while the previous command runs,
//! and it does there everything that needs no command (its process group, its mounts made
//! private, a fresh `/dev/shm` and `/proc`), then waits. The command comes as one message on
//! its socket (its fds as `SCM_RIGHTS`) and a [`Handoff`] the zygote wrote into a page they
//! share; from there it goes on as every zygote command's I does. Async-signal-safe only:
//! raw syscalls on data the zygote prepared before the clone or wrote into the shared page.
#![deny(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::ffi::CStr;
use std::os::fd::RawFd;

use libc::c_char;

use super::sys::{
    check, close_all_except, fail, recv_with_fds, reset_signals_in_zygote_fork, write_all, MAX_FDS,
};
use super::{
    become_init, init, join_cgroup, pidfd_ended, set_stdio, start_shell, view, ChildPlan, ExecArgs,
};
use crate::sandbox::linux::seccomp::Programs;
use crate::sandbox::linux::step::Step;

/// The size of the page (pages) the zygote shares with a spare for its command's hand-off.
pub(crate) const REGION: usize = 256 * 1024;

/// One command for a spare, at the start of the shared region; every pointer points into
/// that region (mapped at the same address in both processes).
#[repr(C)]
pub(crate) struct Handoff {
    pub max_processes: u64,
    pub max_memory: u64,
    pub landlock_write_rights: u64,
    pub drop_capabilities: u8,
    pub fresh_keyring: u8,
    pub install_seccomp: u8,
    /// Which optional fds came, in this order, after the error, status and output pipes.
    pub landlock: u8,
    pub pids_cgroup: u8,
    pub memory_cgroup: u8,
    pub pass_count: u32,
    /// The passed fds' numbers in the shell, in the order they came.
    pub pass_targets: [RawFd; 8],
    pub program: *const c_char,
    pub cwd: *const c_char,
    /// NULL-terminated; `argv_len` counts the NULL.
    pub argv: *const *const c_char,
    pub argv_len: usize,
    pub envp: *const *const c_char,
    pub envp_len: usize,
}

/// What a spare needs from its zygote, prepared before the clone.
pub(crate) struct SpareArgs {
    /// Its end of the socket: `R` when ready (or a failed step's 8-byte record), then the
    /// command.
    pub socket: RawFd,
    pub region: *const Handoff,
    /// The zygote's pid and a pidfd of it.
    pub parent: libc::pid_t,
    pub parent_pidfd: RawFd,
    /// The seccomp programs, for a command that installs them itself (where the zygote had
    /// not installed them on itself when it cloned this spare).
    pub seccomp: Option<&'static Programs>,
}

/// The spare's program. Never returns.
pub(crate) fn run(plan: &mut ChildPlan, args: &SpareArgs) -> ! {
    let socket = args.socket;
    reset_signals_in_zygote_fork();
    // SAFETY: raw syscalls on this process.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if pidfd_ended(args.parent_pidfd) {
            libc::_exit(127); // the zygote died before the signal was armed
        }
        // Z leads a session of its own with no terminal: a process group is enough.
        check(socket, Step::ProcessGroup, libc::setpgid(0, 0) as i64);
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    let mut keep = [socket, args.parent_pidfd];
    close_all_except(&mut keep);
    check(
        socket,
        Step::PrivateMounts,
        super::sys::make_mounts_private() as i64,
    );
    if let Some(view) = &plan.view {
        view::refresh_private(view, socket);
    }
    become_init(plan, socket);
    write_all(socket, b"R");
    let mut fds = [-1 as RawFd; MAX_FDS];
    let mut byte = [0u8; 8];
    let (got, count, _) = recv_with_fds(socket, &mut byte, &mut fds);
    if got != 1 {
        // No command: the zygote let this spare go (its socket closed), or is gone.
        // SAFETY: exiting this process.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: the socket is done with.
    unsafe { libc::close(socket) };
    let fds = fds.get(..count).unwrap_or(&[]);
    // SAFETY: the zygote wrote the hand-off before it sent the message just received.
    let handoff = unsafe { &*args.region };
    let mut next = fds.iter().copied();
    let error_fd = next.next().unwrap_or(-1);
    if error_fd < 0 {
        // SAFETY: exiting this process (the agent sees its error pipe end without a record,
        // then the status pipe end without a status: a killed command).
        unsafe { libc::_exit(super::sys::SETUP_FAILED) };
    }
    let mut take = |wanted: bool| -> RawFd {
        if !wanted {
            return -1;
        }
        match next.next() {
            Some(fd) => fd,
            None => fail(error_fd, Step::Descriptors, libc::EBADF),
        }
    };
    let status_fd = take(true);
    let output = take(true);
    plan.landlock_fd = take(handoff.landlock != 0);
    plan.pids_cgroup_fd = take(handoff.pids_cgroup != 0);
    plan.memory_cgroup_fd = take(handoff.memory_cgroup != 0);
    let mut pass = [(-1 as RawFd, -1 as RawFd); 8];
    let pass_count = (handoff.pass_count as usize).min(pass.len());
    for (slot, &target) in pass
        .iter_mut()
        .zip(handoff.pass_targets.iter())
        .take(pass_count)
    {
        *slot = (take(true), target);
    }
    plan.max_processes = handoff.max_processes;
    plan.max_memory = handoff.max_memory;
    plan.landlock_write_rights = handoff.landlock_write_rights;
    plan.drop_capabilities = handoff.drop_capabilities != 0;
    plan.fresh_keyring = handoff.fresh_keyring != 0;
    plan.seccomp = if handoff.install_seccomp != 0 {
        match args.seccomp {
            Some(programs) => Some(programs),
            None => fail(error_fd, Step::Seccomp, libc::ENOSYS),
        }
    } else {
        None
    };
    // SAFETY: NUL-terminated strings and NULL-terminated arrays the zygote wrote into the
    // shared region, which stays mapped in this process (and in B until its exec).
    let exec = unsafe {
        ExecArgs {
            program: CStr::from_ptr(handoff.program),
            argv: std::slice::from_raw_parts(handoff.argv, handoff.argv_len),
            envp: std::slice::from_raw_parts(handoff.envp, handoff.envp_len),
            cwd: CStr::from_ptr(handoff.cwd),
            stdin: 0, // /dev/null since the zygote's exec
            output,
            pass: pass.get(..pass_count).unwrap_or(&[]),
            parent: args.parent,
            error_fd,
            map_sync: (-1, -1),
            map_sync_unused: (-1, -1),
            probe: false,
            status_fd,
            new_session: false,
            parent_pidfd: args.parent_pidfd,
        }
    };
    set_stdio(&exec);
    join_cgroup(plan.pids_cgroup_fd, error_fd);
    start_shell(plan, &exec, status_fd, init::Parent::Zygote)
}
