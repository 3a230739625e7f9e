//! Raw system-call helpers for the code between fork and exec: async-signal-safe only.
//!
//! No allocation, no locks, no panics: every function here makes plain syscalls on memory the
//! caller owns, and reports failure through return values.
#![deny(
    clippy::panic,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::os::fd::RawFd;

use libc::c_int;

use super::super::step::Step;

/// Exit status of a child whose sandbox step failed (the agent learns which step and why from
/// the error pipe, never from this number).
pub(crate) const SETUP_FAILED: c_int = 126;

pub(crate) fn errno() -> c_int {
    // SAFETY: reading the thread's errno.
    unsafe { *libc::__errno_location() }
}

pub(crate) fn write_all(fd: RawFd, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: valid buffer.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return;
        }
        bytes = bytes.get(n as usize..).unwrap_or_default();
    }
}

/// Writes `n` in decimal into `buf`, returns the digits.
pub(crate) fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        if let Some(slot) = buf.get_mut(i) {
            *slot = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    buf.get(i..).unwrap_or_default()
}

/// Reports `step` failing with `err` on the error pipe (a step code and the errno, 8 bytes) and
/// ends this process.
pub(crate) fn fail(error_fd: RawFd, step: Step, err: c_int) -> ! {
    let mut record = [0u8; 8];
    let (code, errno) = record.split_at_mut(4);
    code.copy_from_slice(&(step as u32).to_ne_bytes());
    errno.copy_from_slice(&err.to_ne_bytes());
    write_all(error_fd, &record);
    // SAFETY: ending the child without running atexit handlers.
    unsafe { libc::_exit(SETUP_FAILED) }
}

/// [`fail`] with the current errno when `result` is negative.
pub(crate) fn check(error_fd: RawFd, step: Step, result: i64) {
    if result < 0 {
        fail(error_fd, step, errno());
    }
}

pub(crate) use super::clone::{raw_clone, raw_fork, raw_fork_into};

/// Whether [`raw_fork_into`] works here with `cgroup` (a cgroup v2 folder open for reading):
/// forks a child into it that exits at once, and reaps it.
pub(crate) fn clone_into_works(cgroup: RawFd) -> bool {
    let pid = raw_fork_into(cgroup);
    if pid == 0 {
        // SAFETY: the child ends at once, without running anything of the parent's.
        unsafe { libc::_exit(0) }
    }
    if pid < 0 {
        return false;
    }
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// Marks every fd from `first` up close-on-exec, or closes them (`close` true). Falls back to
/// a loop where `close_range` is missing.
pub(crate) fn close_from(first: u32, close: bool) {
    let flags: u32 = if close { 0 } else { libc::CLOSE_RANGE_CLOEXEC };
    // SAFETY: close_range/fcntl/close on fds of this process.
    unsafe {
        if libc::syscall(libc::SYS_close_range, first, u32::MAX, flags) == 0 {
            return;
        }
        let mut limit: libc::rlimit = std::mem::zeroed();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(65536) as u32
        } else {
            4096
        };
        for fd in first..max {
            if close {
                libc::close(fd as c_int);
            } else {
                libc::fcntl(fd as c_int, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
}

/// Closes every fd from 3 up except `keep` (-1: none).
pub(crate) fn close_all_but(keep: RawFd) {
    if keep >= 3 {
        // SAFETY: closing fds below `keep` that this process does not use.
        unsafe { libc::syscall(libc::SYS_close_range, 3u32, keep as u32 - 1, 0u32) };
        close_from(keep as u32 + 1, true);
    } else {
        close_from(3, true);
    }
}

/// Closes every fd from 3 up except those in `keep` (-1 entries are ignored; `keep` is sorted
/// in place).
pub(crate) fn close_all_except(keep: &mut [RawFd]) {
    keep.sort_unstable();
    let mut next: RawFd = 3;
    for &fd in keep.iter() {
        if fd < next {
            continue;
        }
        if fd > next {
            // SAFETY: closing fds of this process that nothing here uses.
            unsafe { libc::syscall(libc::SYS_close_range, next as u32, (fd - 1) as u32, 0u32) };
        }
        next = fd + 1;
    }
    close_from(next as u32, true);
}

/// Sets `signal`'s disposition to `SIG_DFL` or `SIG_IGN` (`how`) by the raw `rt_sigaction`
/// system call. Not glibc's `sigaction`/`signal`: since glibc 2.41 (Debian 13) they take a lock
/// (`__abort_lock`, for SIGABRT) that `fork` and `posix_spawn` hold in other threads, and a
/// child made by a raw `clone` while another thread held it (the agent is multithreaded; glibc's
/// fork handlers, which reset it, do not run) waits on it forever: every command of the agent
/// hung in Debian 13 containers (the platform lab, `docker-root`).
pub(crate) fn set_disposition(signal: c_int, how: libc::sighandler_t) -> c_int {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        /// The kernel's `struct sigaction` on these architectures (both have `sa_restorer`).
        #[repr(C)]
        struct KernelSigaction {
            handler: libc::sighandler_t,
            flags: libc::c_ulong,
            restorer: usize,
            mask: u64,
        }
        let action = KernelSigaction {
            handler: how,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        // SAFETY: a valid kernel sigaction (no handler, so no restorer needed), no old action.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                signal,
                &action as *const KernelSigaction,
                std::ptr::null_mut::<KernelSigaction>(),
                std::mem::size_of::<u64>(),
            ) as c_int
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    // SAFETY: sigaction on this process (elsewhere glibc's wrapper: see above).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = how;
        libc::sigaction(signal, &action, std::ptr::null_mut())
    }
}

/// Every signal back to its default action and an empty mask: the agent's handlers must not run
/// in the helpers, and exec keeps an ignored signal ignored.
pub(crate) fn reset_signals() {
    // SAFETY: sigprocmask on this process.
    unsafe {
        for signal in 1..=libc::SIGRTMAX() {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            set_disposition(signal, libc::SIG_DFL);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
}

/// [`reset_signals`] for a fork of the session's zygote: Z reset every disposition once when
/// it started (`zygote.rs: zygote_main`) and has changed only `SIGCHLD` (ignored) since, so
/// that one and the mask are what is left to restore (2 system calls instead of 65).
pub(crate) fn reset_signals_in_zygote_fork() {
    set_disposition(libc::SIGCHLD, libc::SIG_DFL);
    // SAFETY: sigprocmask on this process.
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
}

/// Writes `contents` to the file at `path` (NUL-terminated). 0, or -1 with errno set.
pub(crate) fn write_file(path: &[u8], contents: &[u8]) -> c_int {
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
            *libc::__errno_location() = if n < 0 { err } else { libc::EIO };
            return -1;
        }
        0
    }
}

/// Makes every mount of this mount namespace private (`MS_REC | MS_PRIVATE` on `/`), so that
/// nothing mounted here propagates to the namespace it was copied from. One raw syscall.
pub(crate) fn make_mounts_private() -> c_int {
    // SAFETY: mount(2) with a static path and null pointers for the unused arguments.
    unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    }
}

/// `"<inside> <outside> <count>\n"` into `path` (a uid_map or gid_map).
pub(crate) fn write_id_map(path: &[u8], inside: u32, outside: u32, count: u32) -> c_int {
    let mut line = [0u8; 72];
    let mut len = 0;
    let mut digits = [[0u8; 20]; 3];
    let [a, b, c] = &mut digits;
    let parts: [&[u8]; 6] = [
        decimal(inside as u64, a),
        b" ",
        decimal(outside as u64, b),
        b" ",
        decimal(count as u64, c),
        b"\n",
    ];
    for part in parts {
        let Some(slot) = line.get_mut(len..len + part.len()) else {
            return -1;
        };
        slot.copy_from_slice(part);
        len += part.len();
    }
    write_file(path, line.get(..len).unwrap_or_default())
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
        req.ifr_name[0] = b'l' as libc::c_char;
        req.ifr_name[1] = b'o' as libc::c_char;
        if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(sock, libc::SIOCSIFFLAGS, &mut req);
        }
        libc::close(sock);
    }
}

/// The proxy's end of workspace mode's bridge where the agent cannot join this process's
/// network namespace (an ordinary user's: it was made inside this process's own user
/// namespace): a TCP listener on `127.0.0.1:port` of this namespace, whose loopback is up,
/// sent to the agent as one message (`b"L"` with the fd, `SCM_RIGHTS`) on `socket`, then
/// closed here. A socket keeps the namespace it was made in, so the agent accepts on it from
/// the host's side (`notes/2026-12-06-network-allowlist.md`). 0, or -1 with errno set.
/// Raw system calls on locals only: async-signal-safe.
pub(crate) fn send_listener(socket: RawFd, port: u16) -> c_int {
    // SAFETY: raw system calls on locals and fds of this process.
    unsafe {
        let listener = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if listener < 0 {
            return -1;
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = port.to_be();
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let bound = libc::bind(
            listener,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        if bound != 0 || libc::listen(listener, 1024) != 0 {
            let saved = errno();
            libc::close(listener);
            *libc::__errno_location() = saved;
            return -1;
        }
        let mut control = [0u64; 4];
        let byte = *b"L";
        let mut iov = libc::iovec {
            iov_base: byte.as_ptr() as *mut libc::c_void,
            iov_len: 1,
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        let fd_len = std::mem::size_of::<RawFd>() as u32;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(fd_len) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            libc::close(listener);
            *libc::__errno_location() = libc::EINVAL;
            return -1;
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_len) as usize;
        libc::CMSG_DATA(cmsg)
            .cast::<RawFd>()
            .write_unaligned(listener);
        let mut sent;
        loop {
            sent = libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL);
            if !(sent < 0 && errno() == libc::EINTR) {
                break;
            }
        }
        let saved = errno();
        libc::close(listener);
        if sent != 1 {
            *libc::__errno_location() = if sent < 0 { saved } else { libc::EIO };
            return -1;
        }
        0
    }
}

pub(crate) fn monotonic_ms() -> i64 {
    // SAFETY: clock_gettime into a local.
    unsafe {
        let mut now: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
        now.tv_sec * 1000 + now.tv_nsec / 1_000_000
    }
}

pub(crate) fn sleep_ms(ms: i64) {
    let pause = libc::timespec {
        tv_sec: 0,
        tv_nsec: ms * 1_000_000,
    };
    // SAFETY: nanosleep on a local.
    unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
}

/// Ends this process the way the shell ended: same exit code, or the same signal.
pub(crate) fn exit_like(status: c_int) -> ! {
    // SAFETY: plain process-ending syscalls.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            set_disposition(sig, libc::SIG_DFL);
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

/// At most this many fds come with one message on a zygote's sockets (`zygote_wire.rs`,
/// `spare.rs`).
pub(crate) const MAX_FDS: usize = 16;

/// Receives one message on `socket` into `buf`, retrying on `EINTR`, and its fds
/// (close-on-exec) into `fds`; an fd beyond `fds`' room is closed. Returns the bytes read (-1
/// with errno set on failure), how many fds came, and the message's `msg_flags` (`MSG_TRUNC`,
/// `MSG_CTRUNC`). No allocation: the zygote's forks call it too.
pub(crate) fn recv_with_fds(
    socket: RawFd,
    buf: &mut [u8],
    fds: &mut [RawFd; MAX_FDS],
) -> (isize, usize, c_int) {
    let mut control = [0u64; 1 + (MAX_FDS * 4).div_ceil(8) + 2];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut count = 0;
    // SAFETY: msghdr and its buffers are locals that outlive the call; CMSG_* compute offsets
    // inside `control`, which holds MAX_FDS fds; every fd the kernel put there is kept or
    // closed once.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        let n = loop {
            let n = libc::recvmsg(socket, &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n >= 0 || errno() != libc::EINTR {
                break n;
            }
        };
        let mut header = libc::CMSG_FIRSTHDR(&msg);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(header) as *const RawFd;
                let bytes = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.add(i));
                    match fds.get_mut(count) {
                        Some(slot) => {
                            *slot = fd;
                            count += 1;
                        }
                        None => {
                            libc::close(fd);
                        }
                    }
                }
            }
            header = libc::CMSG_NXTHDR(&msg, header);
        }
        (n as isize, count, msg.msg_flags)
    }
}
