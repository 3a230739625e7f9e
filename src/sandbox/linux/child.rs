//! The code that runs between `fork` and `exec`: async-signal-safe only.
//!
//! Everything here runs in the forked child of a multi-threaded process, so it uses raw
//! syscalls through `libc` and never allocates, locks or touches Rust's std I/O. All inputs
//! (the Landlock ruleset fd, the memory range of the environment to wipe) are prepared by the
//! parent (`super::Prepared`) before the fork.
//!
//! Process shape when namespaces are on (see `notes/2026-11-29-sandbox-design.md`):
//!
//! ```text
//! engine ── W (the spawned child, outside: ignores the group's TERM/INT/…, exits like the shell)
//!            └─ I (PID 1 of the new PID namespace: mounts /proc, reaps, hands W the shell's
//!                 │  status, lingers ≤ LINGER for background jobs, exits)
//!                 └─ B (PID 2: applies Landlock, returns to std, which execs bash)
//! ```
//!
//! All three stay in the engine's process group: the engine's signals reach the shell (and
//! its children) directly, exactly as without a sandbox, and its final SIGKILL of the group
//! reaches I. When I exits the kernel SIGKILLs everything else in the namespace (setsid and
//! double-forked processes included). W's parent-death signal (set by the engine) and I's (set
//! here, while the shell runs) chain the agent's death down to I.

use std::io;
use std::os::fd::RawFd;

use libc::c_int;

/// What the child does, prepared in the parent. Plain data: no heap is touched in the child
/// except reading what the parent already built.
#[derive(Debug)]
pub(crate) struct ChildPlan {
    /// Put the command in fresh PID and mount namespaces (and a user namespace when not root).
    pub namespaces: bool,
    /// Mount a fresh /proc for the new PID namespace.
    pub private_proc: bool,
    /// Also a fresh network namespace (only loopback, brought up).
    pub network_namespace: bool,
    /// With `network_namespace`: one made ahead of time, loopback already up, to join instead
    /// of creating one here (-1: create it here). Only without a user namespace (root).
    pub netns_fd: RawFd,
    /// Landlock ruleset to restrict the shell with (owned by the closure; close-on-exec).
    pub landlock_fd: RawFd,
    /// The agent's environment block `[start, end)`, wiped in PID 1 (a fork of the agent that
    /// a command could otherwise read through `/proc/1/environ`).
    pub env_region: Option<(usize, usize)>,
    /// Where step failures are reported (the command's stderr, or a probe's pipe).
    pub message_fd: RawFd,
    /// A probe: B exits 0 instead of returning to exec.
    pub probe: bool,
    /// Without namespaces: keep a subreaper between the engine and the shell that kills what
    /// the command leaves behind (see `reaper_fork`).
    pub reaper: bool,
}

/// Signals the engine sends to the whole process group: W ignores them (the shell, in the same
/// group, gets them directly) so that W lives to report how the shell ended.
const GROUP_SIGNALS: [c_int; 7] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
];

/// How long PID 1 keeps the namespace alive after the shell exits while other processes of
/// the command still run, so output a background job prints just after the shell ends is not
/// lost. The engine normally ends this sooner: after its own pipe grace it SIGKILLs the
/// process group, PID 1 included. It bounds how long leftovers live if nobody does (the agent
/// died right after the shell exited).
pub(crate) const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// Exit status used when a sandbox step fails before the command starts.
pub(crate) const SETUP_FAILED: c_int = 126;

fn errno() -> c_int {
    // SAFETY: reading the thread's errno.
    unsafe { *libc::__errno_location() }
}

fn write_all(fd: RawFd, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: valid buffer.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return;
        }
        bytes = &bytes[n as usize..];
    }
}

/// Writes `n` in decimal into `buf`, returns the digits.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// A human name for the errnos these steps can hit.
pub(crate) fn errno_text(err: c_int) -> &'static [u8] {
    match err {
        libc::EPERM => b"operation not permitted (EPERM)",
        libc::EACCES => b"permission denied (EACCES)",
        libc::EINVAL => b"invalid argument (EINVAL)",
        libc::ENOSPC => b"namespace limit reached (ENOSPC)",
        libc::EUSERS => b"user namespace nesting limit reached (EUSERS)",
        libc::ENOMEM => b"out of memory (ENOMEM)",
        libc::ENOSYS => b"not implemented by this kernel (ENOSYS)",
        libc::EOPNOTSUPP => b"not enabled in this kernel (EOPNOTSUPP)",
        libc::EAGAIN => b"process limit reached (EAGAIN)",
        libc::ENOENT => b"no such file (ENOENT)",
        libc::EBUSY => b"busy (EBUSY)",
        _ => b"error",
    }
}

/// Reports a failed step on the message fd and ends this process with [`SETUP_FAILED`].
fn fail(fd: RawFd, step: &[u8], err: c_int) -> ! {
    let mut buf = [0u8; 20];
    write_all(fd, b"acp-bash sandbox: ");
    write_all(fd, step);
    write_all(fd, b" failed: ");
    write_all(fd, errno_text(err));
    write_all(fd, b" [errno ");
    write_all(fd, decimal(err.max(0) as u64, &mut buf));
    write_all(
        fd,
        b"]; the command did not run. `acp-bash doctor` shows which sandbox layers work here.\n",
    );
    // SAFETY: ending the child without running atexit handlers.
    unsafe { libc::_exit(SETUP_FAILED) }
}

fn check(fd: RawFd, step: &[u8], result: c_int) {
    if result < 0 {
        fail(fd, step, errno());
    }
}

/// Closes every fd >= 3 except `keep` (or none, with -1).
fn close_other_fds(keep: RawFd) {
    // SAFETY: closing fds this process does not use; close_range where the kernel has it.
    unsafe {
        let ranges: [(u32, u32); 2] = if keep >= 3 {
            [(3, keep as u32 - 1), (keep as u32 + 1, u32::MAX)]
        } else {
            [(3, u32::MAX), (1, 0)]
        };
        for (first, last) in ranges {
            if first > last {
                continue;
            }
            let r = libc::syscall(libc::SYS_close_range, first, last, 0u32);
            if r < 0 {
                let mut limit: libc::rlimit = std::mem::zeroed();
                let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                    limit.rlim_cur.min(65536) as u32
                } else {
                    4096
                };
                let mut fd = first;
                while fd <= last && fd < max {
                    libc::close(fd as c_int);
                    fd += 1;
                }
            }
        }
    }
}

fn write_file(path: &[u8], contents: &[u8]) -> c_int {
    // SAFETY: `path` is NUL-terminated by the callers.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return -1;
        }
        let n = libc::write(fd, contents.as_ptr().cast(), contents.len());
        let err = errno();
        libc::close(fd);
        if n != contents.len() as isize {
            *libc::__errno_location() = err;
            return -1;
        }
        0
    }
}

/// `"<id> <id> 1\n"`: maps our own id to itself in the new user namespace.
fn write_identity_map(path: &[u8], id: u32) -> c_int {
    let mut line = [0u8; 48];
    let mut digits = [0u8; 20];
    let d = decimal(id as u64, &mut digits);
    let mut len = 0;
    for part in [d, b" ", d, b" 1\n"] {
        line[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    write_file(path, &line[..len])
}

/// Brings up `lo` in a fresh network namespace so a command can still talk to itself.
pub(crate) fn loopback_up() {
    // SAFETY: plain ioctls on a socket we own.
    unsafe {
        let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if sock < 0 {
            return;
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(sock, libc::SIOCSIFFLAGS, &mut req);
        }
        libc::close(sock);
    }
}

/// Landlock, in the process that is about to exec.
fn restrict(plan: &ChildPlan) {
    if plan.landlock_fd < 0 {
        return;
    }
    let fd = plan.message_fd;
    // SAFETY: raw prctl and landlock syscalls on a ruleset fd the parent prepared.
    unsafe {
        check(
            fd,
            b"setting no_new_privs (needed by Landlock)",
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
        );
        let r = libc::syscall(libc::SYS_landlock_restrict_self, plan.landlock_fd, 0u32);
        if r < 0 {
            fail(fd, b"applying the Landlock ruleset", errno());
        }
        libc::close(plan.landlock_fd);
    }
}

/// Ends this process the way the shell ended: same exit code, or the same signal.
fn exit_like(status: c_int) -> ! {
    // SAFETY: plain process-ending syscalls.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            1
        })
    }
}

/// W: waits for the shell's status from PID 1, then exits the same way. Never returns.
fn waiter(init: libc::pid_t, status_read: RawFd) -> ! {
    close_other_fds(status_read);
    // SAFETY: raw syscalls only.
    unsafe {
        for sig in GROUP_SIGNALS {
            libc::signal(sig, libc::SIG_IGN);
        }
        // The shell's own status, written by PID 1 when the shell ends (PID 1 may outlive it
        // briefly, see LINGER, and cannot die of most signals itself).
        let mut shell: c_int = 0;
        let mut got = 0usize;
        while got < 4 {
            let n = libc::read(
                status_read,
                (&mut shell as *mut c_int).cast::<u8>().add(got).cast(),
                4 - got,
            );
            if n > 0 {
                got += n as usize;
            } else if n < 0 && errno() == libc::EINTR {
                continue;
            } else {
                break;
            }
        }
        if got == 4 {
            exit_like(shell);
        }
        // PID 1 ended before the shell did (killed, or a setup step failed): report that.
        let mut status: c_int = 0;
        loop {
            let r = libc::waitpid(init, &mut status, 0);
            if r == init {
                exit_like(status);
            }
            if r < 0 && errno() != libc::EINTR {
                libc::_exit(SETUP_FAILED);
            }
        }
    }
}

fn monotonic_ms() -> i64 {
    // SAFETY: clock_gettime into a local.
    unsafe {
        let mut now: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
        now.tv_sec * 1000 + now.tv_nsec / 1_000_000
    }
}

/// I: PID 1 of the namespace. Reaps everything; when the shell exits, hands its status to W,
/// lingers while the command's other processes run (at most [`LINGER`]), then exits, which
/// makes the kernel kill whatever is left. Never returns.
fn init_loop(shell: libc::pid_t, status_write: RawFd, env_region: Option<(usize, usize)>) -> ! {
    close_other_fds(status_write);
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
        // W exits as soon as it has the status: don't die with it.
        libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0);
        write_all(status_write, &status.to_ne_bytes());
        libc::close(status_write);
        for fd in 0..3 {
            libc::close(fd);
        }
        let deadline = monotonic_ms() + LINGER.as_millis() as i64;
        loop {
            let r = libc::waitpid(-1, &mut status, libc::WNOHANG);
            if r > 0 || (r < 0 && errno() == libc::EINTR) {
                continue;
            }
            if r < 0 || monotonic_ms() >= deadline {
                libc::_exit(0); // no one left (ECHILD), or time is up
            }
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 5_000_000,
            };
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
    }
}

/// Runs in the child the engine spawns, as the last step before exec. Returns only in the
/// process that goes on to exec the command.
pub(crate) fn enter(plan: &ChildPlan) -> io::Result<()> {
    let fd = plan.message_fd;
    if !plan.namespaces {
        if plan.reaper && !plan.probe {
            reaper_fork(plan);
        }
        restrict(plan);
        return probe_done(plan);
    }
    // SAFETY: raw syscalls only, as required between fork and exec.
    unsafe {
        let uid = libc::geteuid();
        let gid = libc::getegid();
        let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS;
        let user_ns = uid != 0;
        let join_netns = plan.network_namespace && plan.netns_fd >= 0 && !user_ns;
        if join_netns {
            check(
                fd,
                b"joining the prepared network namespace (setns)",
                libc::setns(plan.netns_fd, libc::CLONE_NEWNET),
            );
        } else if plan.network_namespace {
            flags |= libc::CLONE_NEWNET;
        }
        if user_ns {
            flags |= libc::CLONE_NEWUSER;
        }
        check(fd, b"creating namespaces (unshare)", libc::unshare(flags));
        if user_ns {
            check(
                fd,
                b"writing /proc/self/setgroups",
                write_file(b"/proc/self/setgroups\0", b"deny"),
            );
            check(
                fd,
                b"writing /proc/self/uid_map",
                write_identity_map(b"/proc/self/uid_map\0", uid),
            );
            check(
                fd,
                b"writing /proc/self/gid_map",
                write_identity_map(b"/proc/self/gid_map\0", gid),
            );
        }
        check(
            fd,
            b"making mounts private",
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ),
        );
        if plan.network_namespace && !join_netns {
            loopback_up();
        }
        let mut pipe = [-1 as c_int; 2];
        check(
            fd,
            b"creating a pipe",
            libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC),
        );
        let init = libc::fork();
        check(fd, b"starting the namespace's init (fork)", init);
        if init > 0 {
            libc::close(pipe[1]);
            waiter(init, pipe[0]);
        }

        // I: PID 1.
        libc::close(pipe[0]);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        // If W died before the line above, nobody would wait for us: the pipe tells.
        let mut poll = libc::pollfd {
            fd: pipe[1],
            events: libc::POLLOUT,
            revents: 0,
        };
        if libc::poll(&mut poll, 1, 0) > 0 && poll.revents & libc::POLLERR != 0 {
            libc::_exit(SETUP_FAILED);
        }
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        libc::prctl(libc::PR_SET_NAME, c"acp-bash-init".as_ptr(), 0, 0, 0);
        if plan.private_proc {
            check(
                fd,
                b"mounting a private /proc",
                libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                ),
            );
        }
        let shell = libc::fork();
        check(fd, b"starting the shell (fork)", shell);
        if shell > 0 {
            init_loop(shell, pipe[1], plan.env_region);
        }
    }
    // B: the shell-to-be, PID 2.
    restrict(plan);
    probe_done(plan)
}

fn probe_done(plan: &ChildPlan) -> io::Result<()> {
    if plan.probe {
        // SAFETY: ending a probe child.
        unsafe { libc::_exit(0) }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The fallback when namespaces are unavailable: a subreaper.
//
// W marks itself a child subreaper, so everything the command starts that is orphaned (setsid,
// double fork, nohup) is re-parented to W instead of escaping to the host's init. When the
// shell exits, W lets the rest run for a short while (background output), then SIGKILLs its
// children round after round (a killed child's own children come to W next) until none is
// left, and exits like the shell. The agent's death reaches W as a catchable signal (instead
// of the engine's SIGKILL) so W can do the same before it goes. Weaker than a PID namespace:
// a process that escapes W's subtree another way (e.g. a daemon started through systemd or
// D-Bus) is not W's, and W killed by SIGKILL cleans nothing.

/// What the agent's death sends W in reaper mode (catchable, unlike the engine's SIGKILL).
const REAPER_DEATH_SIGNAL: c_int = libc::SIGPWR;

/// How long the reaper lets leftovers run after the shell exits (shorter than the engine's
/// kill grace, so its SIGKILL never lands on W before W has cleaned up).
const REAPER_LINGER_MS: i64 = 300;

static TERMINATING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static TERMS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

extern "C" fn note_terminating(sig: c_int) {
    TERMINATING.store(true, std::sync::atomic::Ordering::Relaxed);
    if sig == libc::SIGTERM {
        TERMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

extern "C" fn agent_died(_: c_int) {
    kill_descendants();
    // SAFETY: ending the process from a handler.
    unsafe { libc::_exit(128 + libc::SIGKILL) }
}

/// The parent pid from a `/proc/<pid>/stat` line, or -1.
fn stat_ppid(stat: &[u8]) -> libc::pid_t {
    let Some(close) = stat.iter().rposition(|&b| b == b')') else {
        return -1;
    };
    // ") S 1234 ..."
    let mut i = close + 1;
    let mut field = 0;
    let mut value: libc::pid_t = 0;
    let mut digits = false;
    while i < stat.len() {
        let b = stat[i];
        if b == b' ' {
            if digits {
                return value;
            }
            field += 1;
        } else if field == 2 && b.is_ascii_digit() {
            value = value * 10 + (b - b'0') as libc::pid_t;
            digits = true;
        }
        i += 1;
    }
    if digits {
        value
    } else {
        -1
    }
}

/// SIGKILLs every child of this process; returns how many it found.
fn kill_children() -> usize {
    let me = unsafe { libc::getpid() };
    let mut found = 0;
    // SAFETY: raw open/getdents64/read/close on stack buffers.
    unsafe {
        let dir = libc::open(
            c"/proc".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if dir < 0 {
            return 0;
        }
        let mut entries = [0u8; 4096];
        loop {
            let n = libc::syscall(
                libc::SYS_getdents64,
                dir,
                entries.as_mut_ptr(),
                entries.len(),
            );
            if n <= 0 {
                break;
            }
            let mut off = 0usize;
            while off < n as usize {
                // struct linux_dirent64 { u64 ino; i64 off; u16 reclen; u8 type; char name[]; }
                let reclen = u16::from_ne_bytes([entries[off + 16], entries[off + 17]]) as usize;
                let name = &entries[off + 19..off + reclen];
                let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                let name = &name[..len];
                off += reclen;
                if name.is_empty() || !name.iter().all(u8::is_ascii_digit) || name.len() > 10 {
                    continue;
                }
                let mut path = [0u8; 32];
                let mut p = 0;
                for part in [&b"/proc/"[..], name, &b"/stat\0"[..]] {
                    path[p..p + part.len()].copy_from_slice(part);
                    p += part.len();
                }
                let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    continue;
                }
                let mut stat = [0u8; 256];
                let got = libc::read(fd, stat.as_mut_ptr().cast(), stat.len());
                libc::close(fd);
                if got <= 0 {
                    continue;
                }
                if stat_ppid(&stat[..got as usize]) == me {
                    let mut pid: libc::pid_t = 0;
                    for &d in name {
                        pid = pid * 10 + (d - b'0') as libc::pid_t;
                    }
                    libc::kill(pid, libc::SIGKILL);
                    found += 1;
                }
            }
        }
        libc::close(dir);
    }
    found
}

/// Kills and reaps every descendant (they come to us as their parents die).
fn kill_descendants() {
    loop {
        kill_children();
        let mut status = 0;
        // SAFETY: reaping our own children.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r < 0 && errno() != libc::EINTR {
            return; // ECHILD: nothing left
        }
    }
}

/// W in reaper mode: forks the shell-to-be and returns in it; W itself never returns.
fn reaper_fork(plan: &ChildPlan) {
    let fd = plan.message_fd;
    // SAFETY: raw syscalls only.
    unsafe {
        check(
            fd,
            b"becoming a subreaper",
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0),
        );
        let shell = libc::fork();
        check(fd, b"starting the shell (fork)", shell);
        if shell == 0 {
            // If W is SIGKILLed alone, the shell goes with it.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            return;
        }
        close_other_fds(-1);
        for fd in 0..3 {
            libc::close(fd);
        }
        // No SA_RESTART: a signal interrupts the wait below. The engine sends SIGTERM twice
        // before its SIGKILL (which would end W before it cleans up): at the second, W kills
        // everything itself.
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = note_terminating as *const () as usize;
        libc::sigemptyset(&mut action.sa_mask);
        for sig in GROUP_SIGNALS {
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
        action.sa_sigaction = agent_died as *const () as usize;
        libc::sigaction(REAPER_DEATH_SIGNAL, &action, std::ptr::null_mut());
        // Replaces the engine's SIGKILL (armed until this very call, so no gap).
        libc::prctl(libc::PR_SET_PDEATHSIG, REAPER_DEATH_SIGNAL, 0, 0, 0);

        let mut status: c_int = 0;
        let mut shell_status: c_int = 0;
        loop {
            let r = libc::waitpid(-1, &mut status, 0);
            if r == shell {
                shell_status = status;
                break;
            }
            if r < 0 && errno() != libc::EINTR {
                break;
            }
            if TERMS.load(std::sync::atomic::Ordering::Relaxed) >= 2 {
                kill_descendants();
                exit_like(libc::SIGKILL); // the raw wait status of a SIGKILLed shell
            }
        }
        let linger = if TERMINATING.load(std::sync::atomic::Ordering::Relaxed) {
            0
        } else {
            REAPER_LINGER_MS
        };
        let deadline = monotonic_ms() + linger;
        loop {
            let r = libc::waitpid(-1, &mut status, libc::WNOHANG);
            if r > 0 || (r < 0 && errno() == libc::EINTR) {
                continue;
            }
            if r < 0 {
                break; // nothing left
            }
            if monotonic_ms() >= deadline || TERMINATING.load(std::sync::atomic::Ordering::Relaxed)
            {
                kill_descendants();
                break;
            }
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 5_000_000,
            };
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
        exit_like(shell_status)
    }
}
