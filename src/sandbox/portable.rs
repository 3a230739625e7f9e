//! The portable way to start and wait for a command, for platforms without Linux's clone and
//! pidfds (macOS): `posix_spawn`, so that no code of ours runs between fork and exec, and a
//! waiter on a thread of its own. The portable stand-ins for Linux's sealed memfds are in
//! `temp_files.rs`.
//!
//! What a command gets, as on Linux's bare path: a process group of its own (a session of its
//! own when the agent has a controlling terminal), stdin from `/dev/null`, stdout and stderr on
//! the output fd, the passed fds at their numbers and no other (`POSIX_SPAWN_CLOEXEC_DEFAULT` on
//! macOS; elsewhere every fd of the agent is close-on-exec already), every signal at its default
//! disposition and none blocked, exactly the given environment, the given directory.
//!
//! Compiled where a backend uses it (macOS) and in the unit tests on every platform, which run
//! it for real on Linux (glibc's `posix_spawn`).

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use super::Launch;

/// Fds at or above this number carry the sources of the passed fds during the spawn, so that
/// no `dup2` of one passed fd overwrites the source of another (targets are below 64).
const HIGH_FD: RawFd = 64;

/// `POSIX_SPAWN_SETSID`: Apple's (macOS 10.15+, not in the libc crate) and glibc's (2.26+).
#[cfg(target_vendor = "apple")]
const SPAWN_SETSID: libc::c_int = 0x0400;
#[cfg(not(target_vendor = "apple"))]
const SPAWN_SETSID: libc::c_int = libc::POSIX_SPAWN_SETSID as libc::c_int;

/// Closes every fd that no file action names (Apple only; elsewhere Rust's fds are all
/// close-on-exec already).
#[cfg(target_vendor = "apple")]
const SPAWN_CLOEXEC_DEFAULT: libc::c_int = libc::POSIX_SPAWN_CLOEXEC_DEFAULT;
#[cfg(not(target_vendor = "apple"))]
const SPAWN_CLOEXEC_DEFAULT: libc::c_int = 0;

/// `bytes` as a C string, or an `InvalidInput` error where it holds a NUL.
fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        )
    })
}

/// A copy of `fd` at [`HIGH_FD`] or above, close-on-exec.
fn high_copy(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl on an fd the caller borrows; the new fd is ours.
    let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, HIGH_FD) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// Whether this process has a controlling terminal: then each command gets a session of its
/// own (so it cannot read or signal the agent's terminal); else a process group suffices.
fn has_controlling_terminal() -> bool {
    // SAFETY: open and close with a valid path; the fd is closed at once.
    unsafe {
        let fd = libc::open(
            c"/dev/tty".as_ptr(),
            libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC,
        );
        if fd >= 0 {
            libc::close(fd);
            return true;
        }
        io::Error::last_os_error().raw_os_error() != Some(libc::ENXIO)
    }
}

/// Starts `launch` with exactly `env` in `cwd`, stdout and stderr to `output`, each
/// `(source, number)` of `pass` as that number (at most 8), as the module says. Returns the
/// pid, which is also the process group's id. A program or directory that cannot be used is
/// an error of its kind (`NotFound`, `PermissionDenied`).
pub(crate) fn spawn(
    launch: &Launch,
    env: &[(OsString, OsString)],
    cwd: &Path,
    output: RawFd,
    pass: &[(RawFd, RawFd)],
) -> io::Result<libc::pid_t> {
    if pass.len() > 8 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "at most 8 passed fds",
        ));
    }
    let program = cstring(launch.program.as_os_str().as_bytes())?;
    let mut args = vec![program.clone()];
    for arg in &launch.args {
        args.push(cstring(arg.as_bytes())?);
    }
    let mut vars = Vec::with_capacity(env.len());
    for (name, value) in env {
        let mut pair = name.as_bytes().to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        vars.push(cstring(&pair)?);
    }
    let argv: Vec<*mut libc::c_char> = args
        .iter()
        .map(|s| s.as_ptr().cast_mut())
        .chain([std::ptr::null_mut()])
        .collect();
    let envp: Vec<*mut libc::c_char> = vars
        .iter()
        .map(|s| s.as_ptr().cast_mut())
        .chain([std::ptr::null_mut()])
        .collect();
    let cwd = cstring(cwd.as_os_str().as_bytes())?;
    // Every source above the targets first, so that the dup2s below cannot clobber each other.
    let output = high_copy(output)?;
    let sources: Vec<(OwnedFd, RawFd)> = pass
        .iter()
        .map(|&(fd, number)| high_copy(fd).map(|copy| (copy, number)))
        .collect::<io::Result<_>>()?;
    let mut actions = FileActions::new()?;
    check(
        // SAFETY: a valid, initialised actions object and a C string.
        unsafe {
            libc::posix_spawn_file_actions_addopen(
                actions.ptr(),
                0,
                c"/dev/null".as_ptr(),
                libc::O_RDONLY,
                0,
            )
        },
    )?;
    for (source, target) in [(output.as_raw_fd(), 1), (output.as_raw_fd(), 2)]
        .into_iter()
        .chain(sources.iter().map(|(fd, n)| (fd.as_raw_fd(), *n)))
    {
        // SAFETY: a valid actions object; the fds are open.
        check(unsafe { libc::posix_spawn_file_actions_adddup2(actions.ptr(), source, target) })?;
    }
    // SAFETY: a valid actions object and a C string that outlives the spawn.
    check(unsafe { libc::posix_spawn_file_actions_addchdir_np(actions.ptr(), cwd.as_ptr()) })?;
    let mut attributes = Attributes::new()?;
    // The flags are `c_int` in one libc and `c_short` in another: one cast fits both.
    #[allow(clippy::unnecessary_cast)]
    let session = if has_controlling_terminal() {
        SPAWN_SETSID
    } else {
        libc::POSIX_SPAWN_SETPGROUP as libc::c_int
    };
    #[allow(clippy::unnecessary_cast)]
    let flags = session
        | libc::POSIX_SPAWN_SETSIGDEF as libc::c_int
        | libc::POSIX_SPAWN_SETSIGMASK as libc::c_int
        | SPAWN_CLOEXEC_DEFAULT;
    // SAFETY: a valid attributes object; sigset_t is plain data, filled by sigfillset and
    // sigemptyset before use.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigemptyset(&mut none);
        check(libc::posix_spawnattr_setsigdefault(attributes.ptr(), &all))?;
        check(libc::posix_spawnattr_setsigmask(attributes.ptr(), &none))?;
        check(libc::posix_spawnattr_setpgroup(attributes.ptr(), 0))?;
        check(libc::posix_spawnattr_setflags(
            attributes.ptr(),
            flags as libc::c_short,
        ))?;
    }
    let mut pid: libc::pid_t = 0;
    // SAFETY: every pointer is valid until the call returns: the program, argv and envp
    // (NULL-terminated, their strings alive), the actions and the attributes.
    let error = unsafe {
        libc::posix_spawn(
            &mut pid,
            program.as_ptr(),
            &actions.0,
            &attributes.0,
            argv.as_ptr(),
            envp.as_ptr(),
        )
    };
    if error != 0 {
        return Err(io::Error::from_raw_os_error(error));
    }
    Ok(pid)
}

/// `posix_spawn_file_actions_t`, destroyed on drop.
struct FileActions(libc::posix_spawn_file_actions_t);

impl FileActions {
    fn new() -> io::Result<FileActions> {
        // SAFETY: init writes the object; it is destroyed only if init succeeded.
        unsafe {
            let mut actions: libc::posix_spawn_file_actions_t = std::mem::zeroed();
            match libc::posix_spawn_file_actions_init(&mut actions) {
                0 => Ok(FileActions(actions)),
                error => Err(io::Error::from_raw_os_error(error)),
            }
        }
    }

    fn ptr(&mut self) -> *mut libc::posix_spawn_file_actions_t {
        &mut self.0
    }
}

/// `Ok` for 0, else the error number a posix_spawn call returned.
fn check(result: libc::c_int) -> io::Result<()> {
    match result {
        0 => Ok(()),
        error => Err(io::Error::from_raw_os_error(error)),
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`.
        unsafe { libc::posix_spawn_file_actions_destroy(&mut self.0) };
    }
}

/// `posix_spawnattr_t`, destroyed on drop.
struct Attributes(libc::posix_spawnattr_t);

impl Attributes {
    fn new() -> io::Result<Attributes> {
        // SAFETY: as for `FileActions::new`.
        unsafe {
            let mut attributes: libc::posix_spawnattr_t = std::mem::zeroed();
            match libc::posix_spawnattr_init(&mut attributes) {
                0 => Ok(Attributes(attributes)),
                error => Err(io::Error::from_raw_os_error(error)),
            }
        }
    }

    fn ptr(&mut self) -> *mut libc::posix_spawnattr_t {
        &mut self.0
    }
}

impl Drop for Attributes {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`.
        unsafe { libc::posix_spawnattr_destroy(&mut self.0) };
    }
}

/// Waits for `pid` (a child of this process) on a thread of its own, then runs `after_exit`
/// on that thread before the status is handed over: the backend's cleanup (its sweep, a
/// command's private temp folder). The child is reaped even if the waiter is dropped first.
pub(crate) struct Waiter {
    receiver: tokio::sync::oneshot::Receiver<io::Result<std::process::ExitStatus>>,
}

impl Waiter {
    pub(crate) fn new(
        pid: libc::pid_t,
        after_exit: impl FnOnce() + Send + 'static,
    ) -> io::Result<Waiter> {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("acp-bash-wait".into())
            .spawn(move || {
                let status = wait_for(pid);
                after_exit();
                let _ = sender.send(status);
            })?;
        Ok(Waiter { receiver })
    }

    /// The exit status (cancel-safe: can be polled again after being dropped mid-way).
    pub(crate) async fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        (&mut self.receiver)
            .await
            .map_err(|_| io::Error::other("the waiter thread is gone"))?
    }
}

/// Reaps `pid` (blocking).
fn wait_for(pid: libc::pid_t) -> io::Result<std::process::ExitStatus> {
    loop {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    /// Runs `script` through [`spawn`] with `pass`; its output and exit status.
    fn run(script: &str, env: &[(&str, &str)], pass: &[(RawFd, RawFd)]) -> (String, i32, i32) {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let env: Vec<(OsString, OsString)> = env
            .iter()
            .map(|(n, v)| ((*n).into(), (*v).into()))
            .collect();
        let pid = spawn(
            &Launch::new("/bin/bash", ["-c", script]),
            &env,
            Path::new("/"),
            writer.as_raw_fd(),
            pass,
        )
        .unwrap();
        drop(writer);
        let mut output = String::new();
        reader.read_to_string(&mut output).unwrap();
        let status = wait_for(pid).unwrap();
        (output, status.code().unwrap_or(-1), pid)
    }

    /// The shell gets its own group, exactly the environment, `/` as its directory, stdin
    /// empty, stderr on the output, default signal dispositions, the passed fds at their
    /// numbers (even when a source sits on another's target) and no other fd.
    #[test]
    fn a_spawned_shell_gets_exactly_what_it_is_given() {
        let (three_read, three_write) = std::io::pipe().unwrap();
        let (four_read, four_write) = std::io::pipe().unwrap();
        drop((three_write, four_write));
        // Swap: the fd that becomes 4 and the one that becomes 3, whatever their numbers.
        let pass = [(four_read.as_raw_fd(), 3), (three_read.as_raw_fd(), 4)];
        // Ignored here, it must be at its default in the shell (`trap -p` lists nothing, and
        // `yes | head` ends by SIGPIPE).
        // SAFETY: setting a disposition; restored below.
        let old = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        // First, before bash opens anything of its own: the fds it holds (the glob's own
        // directory fd is the lowest free one, 5).
        let script = "for f in /proc/$$/fd/*; do printf '%s ' \"${f##*/}\"; done; echo; \
                      echo pgid=$({ cut -d' ' -f5 /proc/$$/stat || ps -o pgid= -p $$; } 2>/dev/null \
                      | tr -d ' ') pid=$$; env | sort; pwd; cat; \
                      yes | head -n 1; echo err >&2; exit 7";
        let (output, code, pid) = run(script, &[("ONLY", "this")], &pass);
        // SAFETY: restoring the disposition saved above.
        unsafe { libc::signal(libc::SIGPIPE, old) };
        assert_eq!(code, 7, "{output}");
        let mut lines = output.lines();
        let fds = lines.next().unwrap().trim().to_string();
        if cfg!(target_os = "linux") {
            // Elsewhere than Apple (no POSIX_SPAWN_CLOEXEC_DEFAULT), the fds this process
            // holds without close-on-exec reach the shell too: those it inherited (cargo's
            // jobserver). Nothing else may.
            let mut expected: Vec<i32> = (0..=5).collect();
            for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
                let fd: i32 = entry.file_name().to_str().unwrap().parse().unwrap();
                // SAFETY: F_GETFD only reads the fd's flags (an fd closed meanwhile gives -1).
                let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
                if fd > 5 && flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                    expected.push(fd);
                }
            }
            let mut got: Vec<i32> = fds.split(' ').map(|fd| fd.parse().unwrap()).collect();
            got.sort();
            expected.sort();
            assert_eq!(got, expected, "fds: {fds}");
        }
        assert_eq!(lines.next(), Some(format!("pgid={pid} pid={pid}").as_str()));
        // bash adds PWD, SHLVL and `_`; nothing of this process's environment is there.
        let vars: Vec<&str> = lines.by_ref().take(4).collect();
        assert_eq!(vars[0], "ONLY=this", "{output}");
        assert!(
            vars[1..]
                .iter()
                .all(|v| v.starts_with("PWD=") || v.starts_with("SHLVL=") || v.starts_with("_=")),
            "{output}"
        );
        assert_eq!(lines.next(), Some("/"));
        assert_eq!(lines.next(), Some("y"));
        assert_eq!(output.lines().last(), Some("err"));
    }

    #[test]
    fn a_program_or_directory_that_cannot_be_used_is_an_error_of_its_kind() {
        let (_reader, writer) = std::io::pipe().unwrap();
        let missing = spawn(
            &Launch::new("/nonexistent/bash", ["-c", "true"]),
            &[],
            Path::new("/"),
            writer.as_raw_fd(),
            &[],
        );
        assert_eq!(missing.unwrap_err().kind(), io::ErrorKind::NotFound);
        let no_dir = spawn(
            &Launch::new("/bin/bash", ["-c", "true"]),
            &[],
            Path::new("/nonexistent"),
            writer.as_raw_fd(),
            &[],
        );
        assert_eq!(no_dir.unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[tokio::test]
    async fn the_waiter_reports_the_status_after_its_cleanup_ran() {
        let (_reader, writer) = std::io::pipe().unwrap();
        let pid = spawn(
            &Launch::new("/bin/bash", ["-c", "kill -TERM $$"]),
            &[],
            Path::new("/"),
            writer.as_raw_fd(),
            &[],
        )
        .unwrap();
        let cleaned = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = cleaned.clone();
        let mut waiter = Waiter::new(pid, move || {
            flag.store(true, std::sync::atomic::Ordering::SeqCst)
        })
        .unwrap();
        let status = waiter.wait().await.unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert!(cleaned.load(std::sync::atomic::Ordering::SeqCst));
    }
}
