//! The fallback when namespaces are unavailable: a subreaper. Async-signal-safe only.
//!
//! W marks itself a child subreaper, so everything the command starts that is orphaned (setsid,
//! double fork, nohup) is re-parented to W instead of escaping to the host's init. When the
//! shell exits, W lets the rest run for a short while (background output), then SIGKILLs its
//! children round after round (a killed child's own children come to W next) until none is
//! left, and exits like the shell. The agent's death reaches W as a catchable signal (instead
//! of the engine's SIGKILL) so W can do the same before it goes. Weaker than a PID namespace:
//! a process that escapes W's subtree another way (e.g. a daemon started through systemd or
//! D-Bus) is not W's, and W killed by SIGKILL cleans nothing.
#![deny(clippy::panic, clippy::unwrap_used, clippy::expect_used)]
// Fixed-size stack buffers indexed within their bounds (checked before each access).
#![allow(clippy::indexing_slicing)]

use std::os::fd::RawFd;

use libc::c_int;

use super::super::step::Step;
use super::sys::{check, close_all_but, errno, exit_like, monotonic_ms, raw_fork, sleep_ms};
use super::waiter::GROUP_SIGNALS;

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

/// W in reaper mode (the shell-to-be returns from here; W never does): forks the shell-to-be and returns in it; W itself never returns.
pub(crate) fn fork_shell(error_fd: RawFd) {
    let fd = error_fd;
    // SAFETY: raw syscalls only.
    unsafe {
        check(
            fd,
            Step::Subreaper,
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) as i64,
        );
        let shell = raw_fork();
        check(fd, Step::StartShell, shell as i64);
        if shell == 0 {
            // If W is SIGKILLed alone, the shell goes with it.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            return;
        }
        close_all_but(-1);
        for fd in 0..3 {
            libc::close(fd);
        }
        // No SA_RESTART: a signal interrupts the wait below. (glibc's sigaction is safe here only
        // because none of these is SIGABRT: see `sys::set_disposition`.) The engine sends SIGTERM twice
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
            sleep_ms(5);
        }
        exit_like(shell_status)
    }
}
