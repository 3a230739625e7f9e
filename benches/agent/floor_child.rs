//! The `floor` case's per-command processes, from the fork in its Z-like process to the exec of
//! `bash -c true`: W (the fork of Z, which makes the command's own namespaces), I (PID 1 of the
//! command's PID namespace) and B (the shell-to-be). The same shape as acp-bash's zygote
//! commands (`src/sandbox/linux/child/`), with none of acp-bash's code but its forks (the same
//! file, `child/clone.rs`): only the kernel's part.
//!
//! Everything here runs between fork and exec: async-signal-safe only (raw system calls on data
//! Z prepared before forking; no allocation, no locks, no panics). Each process stamps
//! `CLOCK_MONOTONIC` into a page shared with Z ([`slot`]), so Z can say where the time went.
#![deny(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::os::fd::RawFd;

use libc::{c_char, c_int, c_long};

// acp-bash's own forks, the same file (it needs nothing but libc); not all of it is used here.
#[allow(dead_code)]
#[path = "../../src/sandbox/linux/child/clone.rs"]
mod clone;
use clone::{raw_clone3, raw_fork, CLONE_INTO_CGROUP};

/// What one command does, as bits (each row of the case sets some).
pub mod flag {
    /// W makes its own PID namespace (and I, its PID 1, forks the shell).
    pub const PID_NS: u32 = 1;
    /// W makes its own copy of Z's mount namespace.
    pub const MNT_NS: u32 = 1 << 1;
    /// W makes every mount of its copy private again (`mount --make-rprivate /`), as acp-bash's
    /// W does (Z's are private already).
    pub const RPRIVATE: u32 = 1 << 2;
    /// I mounts a fresh `/proc` for the command's PID namespace.
    pub const PROC: u32 = 1 << 3;
    /// W mounts a fresh tmpfs on `/dev/shm` (acp-bash's per-command `refresh_private`).
    pub const SHM: u32 = 1 << 4;
    /// W joins a child cgroup: writes `0` to its cgroup v2 `cgroup.procs`.
    pub const CGROUP_V2_PROCS: u32 = 1 << 5;
    /// W joins a child cgroup: writes `0` to its cgroup v1 (pids) `tasks` (acp-bash's way).
    pub const CGROUP_V1_TASKS: u32 = 1 << 6;
    /// Z starts W with `clone3(CLONE_INTO_CGROUP)` (cgroup v2): born in the cgroup, no join.
    pub const INTO_CGROUP: u32 = 1 << 7;
    /// In B: a new session keyring, the capability bounding set dropped to acp-bash's five
    /// (root only), `PR_SET_NO_NEW_PRIVS`, Landlock `restrict_self`, seccomp.
    pub const CONFINE: u32 = 1 << 8;
    /// Z starts the command's PID 1 itself with `clone3(CLONE_NEWPID | CLONE_NEWNS)`: no W,
    /// one fork and one exit fewer, the same namespaces.
    pub const PID1_BY_CLONE3: u32 = 1 << 9;
    /// W: `setsid` (a session and process group of its own, as acp-bash's W).
    pub const SETSID: u32 = 1 << 10;
    /// W: `setpgid(0, 0)` instead (a process group of its own in Z's session, which has no
    /// controlling terminal: Z made its own session when it started).
    pub const SETPGID: u32 = 1 << 11;
}

/// The shared page's slots: when each step ended (`CLOCK_MONOTONIC`, ns; 0: not reached).
pub mod slot {
    /// Z has read the request.
    pub const RECV: usize = 0;
    pub const W_START: usize = 1;
    /// W: after `setsid` and the cgroup join.
    pub const W_CGROUP: usize = 2;
    /// W: after its `unshare`.
    pub const W_UNSHARED: usize = 3;
    /// W: after `--make-rprivate` and the `/dev/shm` tmpfs.
    pub const W_VIEW: usize = 4;
    pub const I_START: usize = 5;
    /// I: after mounting `/proc` (and, with no W, W's steps).
    pub const I_PROC: usize = 6;
    pub const B_START: usize = 7;
    /// B: right before `execve`.
    pub const B_EXEC: usize = 8;
    /// The shell reaped (by I, or by whoever forked it).
    pub const SHELL_REAPED: usize = 9;
    /// I's last instruction before `_exit`.
    pub const I_EXIT: usize = 10;
    /// The shell's status sent to the bench (by W, or by I when there is no W).
    pub const STATUS_SENT: usize = 11;
    /// W has reaped I.
    pub const W_REAPED_I: usize = 12;
    /// W's last instruction before `_exit`.
    pub const W_EXIT: usize = 13;
    /// Z has reaped its child.
    pub const Z_REAPED: usize = 14;
    /// A failed step: `step << 32 | errno`.
    pub const FAILED: usize = 15;
    pub const COUNT: usize = 16;
}

/// The steps that can fail, as reported in [`slot::FAILED`].
pub const STEP_NAMES: [&str; 14] = [
    "-",
    "fork",
    "setsid / setpgid",
    "cgroup join",
    "unshare",
    "--make-rprivate /",
    "tmpfs on /dev/shm",
    "mount /proc",
    "session keyring",
    "capability bounding set",
    "no_new_privs",
    "Landlock restrict_self",
    "seccomp",
    "exec",
];
const FORK: u64 = 1;
const SETSID: u64 = 2;
const CGROUP: u64 = 3;
const UNSHARE: u64 = 4;
const RPRIVATE: u64 = 5;
const SHM: u64 = 6;
const PROC: u64 = 7;
const KEYRING: u64 = 8;
const CAPABILITIES: u64 = 9;
const NO_NEW_PRIVS: u64 = 10;
const LANDLOCK: u64 = 11;
const SECCOMP: u64 = 12;
const EXEC: u64 = 13;

/// Everything the children use, prepared by Z before any fork.
pub struct Prepared {
    pub bash: *const c_char,
    /// `[bash, "-c", "true", NULL]`.
    pub argv: *const *const c_char,
    /// The bench's environment, NULL-terminated.
    pub envp: *const *const c_char,
    /// Z's end of the bench's socket: the shell's status goes there (`S` + 4 bytes).
    pub socket: RawFd,
    /// [`slot::COUNT`] `u64`s in a `MAP_SHARED` page.
    pub slots: *mut u64,
    pub cgroup_v2_procs: RawFd,
    pub cgroup_v2_dir: RawFd,
    pub cgroup_v1_tasks: RawFd,
    /// A Landlock ruleset like acp-bash's workspace one (-1: none on this kernel).
    pub landlock: RawFd,
    /// The seccomp program (`len` 0: none for this architecture).
    pub seccomp: libc::sock_fprog,
    /// Root in Z's user namespace: B drops the bounding set as acp-bash does for root.
    pub drop_capabilities: bool,
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime into a local struct.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn mark(p: &Prepared, at: usize) {
    if at < slot::COUNT {
        // SAFETY: the shared page holds slot::COUNT u64s.
        unsafe { std::ptr::write_volatile(p.slots.add(at), now_ns()) };
    }
}

fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Records the failed step and its errno, and exits.
fn fail(p: &Prepared, step: u64) -> ! {
    let code = (step << 32) | errno() as u32 as u64;
    // SAFETY: the shared page holds slot::COUNT u64s; _exit never returns.
    unsafe {
        std::ptr::write_volatile(p.slots.add(slot::FAILED), code);
        libc::_exit(100 + step as c_int)
    }
}

fn check(p: &Prepared, step: u64, result: c_long) {
    if result < 0 {
        fail(p, step);
    }
}

/// Waits for `pid`; its wait status (EINTR retried).
fn wait_for(pid: libc::pid_t) -> c_int {
    let mut status: c_int = 0;
    // SAFETY: waitpid into a local.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 && errno() == libc::EINTR {}
    status
}

/// `S` + the shell's wait status, to the bench.
fn send_status(p: &Prepared, status: c_int) {
    let b = status.to_ne_bytes();
    let message = [b'S', b[0], b[1], b[2], b[3]];
    mark(p, slot::STATUS_SENT);
    // SAFETY: send on Z's socket (SOCK_SEQPACKET: one message).
    unsafe {
        libc::send(
            p.socket,
            message.as_ptr().cast(),
            message.len(),
            libc::MSG_NOSIGNAL,
        )
    };
}

/// Starts one command as `flags` say; returns (in Z) the pid of Z's child, or -1.
pub fn spawn(p: &Prepared, flags: u32) -> libc::pid_t {
    let into_cgroup = flags & flag::INTO_CGROUP != 0;
    let cgroup = if into_cgroup { CLONE_INTO_CGROUP } else { 0 };
    if flags & flag::PID1_BY_CLONE3 != 0 {
        let namespaces = (libc::CLONE_NEWPID | libc::CLONE_NEWNS) as u64;
        let pid = raw_clone3(namespaces | cgroup, p.cgroup_v2_dir);
        if pid == 0 {
            pid1(p, flags, -1);
        }
        return pid;
    }
    let pid = if into_cgroup {
        raw_clone3(cgroup, p.cgroup_v2_dir)
    } else {
        raw_fork()
    };
    if pid == 0 {
        if flags & (flag::PID_NS | flag::MNT_NS) == 0 {
            shell(p, flags);
        }
        waiter(p, flags);
    }
    pid
}

/// W's own steps before its namespaces: a new session (or process group), the cgroup join.
fn session_and_cgroup(p: &Prepared, flags: u32) {
    // SAFETY: raw system calls on fds Z opened.
    unsafe {
        if flags & flag::SETSID != 0 {
            check(p, SETSID, libc::setsid() as c_long);
        }
        if flags & flag::SETPGID != 0 {
            check(p, SETSID, libc::setpgid(0, 0) as c_long);
        }
        for (bit, fd) in [
            (flag::CGROUP_V2_PROCS, p.cgroup_v2_procs),
            (flag::CGROUP_V1_TASKS, p.cgroup_v1_tasks),
        ] {
            if flags & bit != 0 {
                check(
                    p,
                    CGROUP,
                    libc::write(fd, b"0".as_ptr().cast(), 1) as c_long,
                );
            }
        }
    }
}

/// W's steps in its new mount namespace: `--make-rprivate /`, a fresh `/dev/shm`.
fn view_steps(p: &Prepared, flags: u32) {
    // SAFETY: mount with static strings.
    unsafe {
        if flags & flag::RPRIVATE != 0 {
            check(
                p,
                RPRIVATE,
                libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ) as c_long,
            );
        }
        if flags & flag::SHM != 0 {
            check(
                p,
                SHM,
                libc::mount(
                    c"tmpfs".as_ptr(),
                    c"/dev/shm".as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    c"mode=1777".as_ptr().cast(),
                ) as c_long,
            );
        }
    }
}

/// W: its namespaces, then I (or, with a mount namespace only, the shell); reports the shell's
/// status, waits for I, exits. Never returns.
fn waiter(p: &Prepared, flags: u32) -> ! {
    mark(p, slot::W_START);
    session_and_cgroup(p, flags);
    mark(p, slot::W_CGROUP);
    let mut namespaces = 0;
    if flags & flag::PID_NS != 0 {
        namespaces |= libc::CLONE_NEWPID;
    }
    if flags & flag::MNT_NS != 0 {
        namespaces |= libc::CLONE_NEWNS;
    }
    // SAFETY: raw system calls only.
    unsafe {
        check(p, UNSHARE, libc::unshare(namespaces) as c_long);
        mark(p, slot::W_UNSHARED);
        view_steps(p, flags);
        mark(p, slot::W_VIEW);
        if flags & flag::PID_NS == 0 {
            let shell_pid = raw_fork();
            check(p, FORK, shell_pid as c_long);
            if shell_pid == 0 {
                shell(p, flags);
            }
            let status = wait_for(shell_pid);
            mark(p, slot::SHELL_REAPED);
            send_status(p, status);
            mark(p, slot::W_EXIT);
            libc::_exit(0);
        }
        let mut pipe = [-1 as c_int; 2];
        check(
            p,
            FORK,
            libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) as c_long,
        );
        let [status_read, status_write] = pipe;
        let init = raw_fork();
        check(p, FORK, init as c_long);
        if init == 0 {
            libc::close(status_read);
            pid1(p, flags, status_write);
        }
        libc::close(status_write);
        let mut status = [0u8; 4];
        let got = libc::read(status_read, status.as_mut_ptr().cast(), 4);
        if got == 4 {
            send_status(p, c_int::from_ne_bytes(status));
        }
        let init_status = wait_for(init);
        mark(p, slot::W_REAPED_I);
        mark(p, slot::W_EXIT);
        if got == 4 {
            libc::_exit(0);
        }
        // I failed a step: exit as it did.
        libc::_exit(if libc::WIFEXITED(init_status) {
            libc::WEXITSTATUS(init_status)
        } else {
            99
        })
    }
}

/// I, PID 1: a fresh `/proc`, the shell, its status to W (`status_write`), or, started by Z
/// itself (`status_write` -1), W's steps first and the status straight to the bench.
/// Never returns.
fn pid1(p: &Prepared, flags: u32, status_write: RawFd) -> ! {
    mark(p, slot::I_START);
    let no_w = status_write < 0;
    if no_w {
        session_and_cgroup(p, flags);
        view_steps(p, flags);
    }
    // SAFETY: raw system calls only.
    unsafe {
        if flags & flag::PROC != 0 {
            check(
                p,
                PROC,
                libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                ) as c_long,
            );
        }
        mark(p, slot::I_PROC);
        let shell_pid = raw_fork();
        check(p, FORK, shell_pid as c_long);
        if shell_pid == 0 {
            shell(p, flags);
        }
        let status = wait_for(shell_pid);
        mark(p, slot::SHELL_REAPED);
        if no_w {
            send_status(p, status);
        } else {
            let b = status.to_ne_bytes();
            libc::write(status_write, b.as_ptr().cast(), 4);
        }
        // As acp-bash's PID 1: one look for anything left (nothing: ECHILD), then exit.
        let mut any: c_int = 0;
        libc::waitpid(-1, &mut any, libc::WNOHANG);
        mark(p, slot::I_EXIT);
        libc::_exit(0)
    }
}

/// `keyctl(2)`'s KEYCTL_JOIN_SESSION_KEYRING.
const KEYCTL_JOIN_SESSION_KEYRING: c_long = 1;
/// The capabilities acp-bash's root commands keep (CAP_CHOWN … CAP_FSETID).
const KEPT_CAPABILITIES: u32 = 5;

/// B: the per-command confinement (with [`flag::CONFINE`]), then exec. Never returns.
fn shell(p: &Prepared, flags: u32) -> ! {
    mark(p, slot::B_START);
    // SAFETY: raw system calls on data Z prepared.
    unsafe {
        if flags & flag::CONFINE != 0 {
            let r = libc::syscall(
                libc::SYS_keyctl,
                KEYCTL_JOIN_SESSION_KEYRING,
                std::ptr::null::<c_char>(),
            );
            if r < 0 && errno() != libc::ENOSYS {
                fail(p, KEYRING);
            }
            if p.drop_capabilities {
                for cap in KEPT_CAPABILITIES..64 {
                    let r = libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
                    if r < 0 && errno() == libc::EINVAL {
                        break; // past the kernel's last capability
                    }
                    check(p, CAPABILITIES, r as c_long);
                }
                libc::prctl(
                    libc::PR_CAP_AMBIENT,
                    libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
            }
            check(
                p,
                NO_NEW_PRIVS,
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as c_long,
            );
            if p.landlock >= 0 {
                check(
                    p,
                    LANDLOCK,
                    libc::syscall(libc::SYS_landlock_restrict_self, p.landlock, 0u32),
                );
            }
            if p.seccomp.len > 0 {
                check(
                    p,
                    SECCOMP,
                    libc::syscall(
                        libc::SYS_seccomp,
                        libc::SECCOMP_SET_MODE_FILTER,
                        0u32,
                        &p.seccomp as *const libc::sock_fprog,
                    ),
                );
            }
        }
        mark(p, slot::B_EXEC);
        libc::execve(p.bash, p.argv, p.envp);
        fail(p, EXEC)
    }
}
