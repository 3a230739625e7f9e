//! The raw forks of the code between fork and exec: `clone` and `clone3` without `CLONE_VM`
//! (no glibc `fork()` and its atfork handlers in a child of a multi-threaded process).
//! Async-signal-safe: plain system calls on the caller's stack.
//!
//! It needs nothing but `libc`, so that the `floor` bench compiles this same file for its own
//! processes (`benches/agent/floor_child.rs`): the kernel's floor is measured with our forks.
#![deny(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::os::fd::RawFd;

use libc::c_int;

/// A fork through the raw `clone` syscall. Returns 0 in the child, the child's pid in the
/// parent, -1 on error.
pub(crate) fn raw_fork() -> libc::pid_t {
    raw_clone(0)
}

/// [`raw_fork`] into the new namespaces of `namespaces` (`CLONE_NEW*` flags; 0: none).
pub(crate) fn raw_clone(namespaces: c_int) -> libc::pid_t {
    // SAFETY: clone without CLONE_VM gives the child its own copy of memory and continues on a
    // copy of this stack, exactly like fork.
    unsafe {
        libc::syscall(
            libc::SYS_clone,
            (namespaces | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        ) as libc::pid_t
    }
}

/// `struct clone_args` up to `cgroup` (`CLONE_ARGS_SIZE_VER2`, Linux 5.7).
#[repr(C)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `CLONE_INTO_CGROUP` (Linux 5.7).
pub(crate) const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// [`raw_fork`] with `clone3` and `flags` (`CLONE_NEW*` flags, and [`CLONE_INTO_CGROUP`] with
/// `cgroup`, a cgroup v2 folder open for reading; -1: none). Same returns as [`raw_fork`]; -1
/// with errno where the kernel refuses (ENOSYS or E2BIG before 5.7, a seccomp filter,
/// EACCES/EPERM).
pub(crate) fn raw_clone3(flags: u64, cgroup: RawFd) -> libc::pid_t {
    let args = CloneArgs {
        flags,
        pidfd: 0,
        child_tid: 0,
        parent_tid: 0,
        exit_signal: libc::SIGCHLD as u64,
        stack: 0,
        stack_size: 0,
        tls: 0,
        set_tid: 0,
        set_tid_size: 0,
        cgroup: if cgroup >= 0 { cgroup as u64 } else { 0 },
    };
    // SAFETY: clone3 with a valid struct of its size, without CLONE_VM and without a stack: like
    // fork, the child gets its own copy of memory and continues on a copy of this stack.
    unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        ) as libc::pid_t
    }
}

/// [`raw_fork`] straight into the cgroup v2 folder open as `cgroup` (`clone3` with
/// `CLONE_INTO_CGROUP`): the child starts there, with no migration through `cgroup.procs`
/// (whose system-wide lock costs milliseconds). Returns as [`raw_clone3`].
pub(crate) fn raw_fork_into(cgroup: RawFd) -> libc::pid_t {
    raw_clone3(CLONE_INTO_CGROUP, cgroup)
}
