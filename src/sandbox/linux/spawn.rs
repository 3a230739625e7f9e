//! The parent's side of starting a command: prepares everything the child needs (it may not
//! allocate), clones, writes a root command's id maps, and reads the child's error pipe until
//! the shell has exec'd or a step has failed.
//!
//! Without a sandbox plan the child shares the agent's memory (`CLONE_VM | CLONE_VFORK`, as
//! `posix_spawn` does) and the agent waits only until it has exec'd. With one, the child is a
//! plain raw `clone` (it forks again and never execs itself).

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::child::{self, ChildPlan, ExecArgs};
use super::step::StepError;
use crate::sandbox::Launch;

/// `bytes` as a C string, or an `InvalidInput` error where it holds a NUL.
pub(super) fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        )
    })
}

/// Pointers to `strings` and a NULL after them: an `argv` or `envp` for `execve` (valid while
/// `strings` lives).
pub(super) fn null_terminated(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain([std::ptr::null()])
        .collect()
}

/// A close-on-exec pipe: (read end, write end).
pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 into a local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two new fds we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The id maps a root command's user namespace gets, read once from this process's own
/// (`/proc/self/uid_map`, `gid_map`): every id this namespace has, mapped to itself. On the host
/// that is `0 0 4294967295`; in a user namespace that maps only part of the ids (rootless podman
/// or docker, LXD, Kubernetes user namespaces) it is that part, since a map naming ids the
/// parent does not have is refused (EPERM).
pub(crate) fn identity_maps() -> io::Result<(&'static str, &'static str)> {
    use std::sync::OnceLock;
    static MAPS: OnceLock<(String, String)> = OnceLock::new();
    if let Some((uids, gids)) = MAPS.get() {
        return Ok((uids, gids));
    }
    let uids = identity_map(&std::fs::read_to_string("/proc/self/uid_map")?)?;
    let gids = identity_map(&std::fs::read_to_string("/proc/self/gid_map")?)?;
    let (uids, gids) = MAPS.get_or_init(|| (uids, gids));
    Ok((uids, gids))
}

/// An identity map of the ids `map` (a `uid_map` or `gid_map` as read: `inside outside count`
/// per line) holds inside its namespace: `inside inside count` per line.
pub(crate) fn identity_map(map: &str) -> io::Result<String> {
    let mut out = String::new();
    for line in map.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<u64> = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "an unreadable id map"))?;
        let [inside, _, count] = fields[..] else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "an unreadable id map",
            ));
        };
        out.push_str(&format!("{inside} {inside} {count}\n"));
    }
    if out.is_empty() {
        // A namespace without a map has no id to give.
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    Ok(out)
}

/// What to start, besides the program: environment, directory, output and passed fds.
pub(crate) struct Request<'a> {
    pub launch: &'a Launch,
    pub env: &'a [(OsString, OsString)],
    pub cwd: &'a Path,
    /// stdout and stderr.
    pub output: RawFd,
    /// `(source, target)`: fds the shell gets besides 0–2.
    pub pass: &'a [(RawFd, RawFd)],
}

extern "C" fn vfork_child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `ExecArgs`, alive until we exec or exit (CLONE_VFORK).
    let exec = unsafe { &*(arg as *const ExecArgs) };
    child::program(exec, None)
}

/// Starts `request`, confined by `plan`, and returns the pid of the process to wait for once
/// the shell has exec'd. A failed step comes back as an [`io::Error`] wrapping a [`StepError`]
/// (its kind from the errno).
pub(crate) fn spawn(
    request: &Request,
    plan: Option<&ChildPlan>,
    probe: bool,
) -> io::Result<libc::pid_t> {
    let program = cstring(request.launch.program.as_os_str().as_bytes())?;
    let mut args = vec![program.clone()];
    for arg in &request.launch.args {
        args.push(cstring(arg.as_bytes())?);
    }
    let mut vars = Vec::with_capacity(request.env.len());
    for (name, value) in request.env {
        let mut pair = name.as_bytes().to_vec();
        pair.push(b'=');
        pair.extend_from_slice(value.as_bytes());
        vars.push(cstring(&pair)?);
    }
    if request.pass.len() > 8 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "at most 8 passed fds",
        ));
    }
    let null = dev_null()?;
    let (error_read, error_write) = pipe()?;
    let parent_maps = plan.is_some_and(|p| p.namespaces && p.user_namespace && p.parent_maps_ids);
    let sync = if parent_maps {
        Some((pipe()?, pipe()?))
    } else {
        None
    };
    let (argv, envp) = (null_terminated(&args), null_terminated(&vars));
    let cwd = cstring(request.cwd.as_os_str().as_bytes())?;
    let exec = ExecArgs {
        argv: &argv,
        envp: &envp,
        program: &program,
        cwd: &cwd,
        stdin: null,
        output: request.output,
        pass: request.pass,
        parent: std::process::id() as libc::pid_t,
        error_fd: error_write.as_raw_fd(),
        map_sync: sync.as_ref().map_or((-1, -1), |((_, tell), (wait, _))| {
            (tell.as_raw_fd(), wait.as_raw_fd())
        }),
        map_sync_unused: sync
            .as_ref()
            .map_or((-1, -1), |((from_child, _), (_, to_child))| {
                (from_child.as_raw_fd(), to_child.as_raw_fd())
            }),
        probe,
        status_fd: -1,
        new_session: has_controlling_terminal(),
        parent_pidfd: -1,
    };
    // Not zeroed (a stack needs no initial contents): zeroing 64 KiB per command cost more
    // instructions than the rest of the spawn.
    let mut stack: Vec<u8> = Vec::with_capacity(if plan.is_none() { 64 * 1024 } else { 0 });
    // SAFETY: all signals are blocked around the clone so that no handler of the agent runs in
    // the child before it resets them; the child only makes raw system calls on data prepared
    // above. With CLONE_VFORK this frame stays alive until the child has exec'd or exited.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = match plan {
            None => {
                let top = (stack.as_mut_ptr() as usize + stack.capacity()) & !15;
                libc::clone(
                    vfork_child,
                    top as *mut libc::c_void,
                    libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                    &exec as *const ExecArgs as *mut libc::c_void,
                )
            }
            Some(plan) => {
                let pid = if plan.clone_into.init >= 0 {
                    child::sys::raw_fork_into(plan.clone_into.init)
                } else {
                    child::sys::raw_fork()
                };
                if pid == 0 {
                    child::program(&exec, Some(plan));
                }
                pid
            }
        };
        let clone_error = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(clone_error);
        }
        pid
    };
    drop(stack);
    drop(error_write);
    if let Some(((from_child, tell), (wait, to_child))) = sync {
        drop(tell);
        drop(wait);
        let mut byte = [0u8; 1];
        if read_full(&from_child, &mut byte) == 1 {
            // Root's user namespace maps every id it has to itself: the command keeps working
            // on files of any owner, with no capability outside its namespaces. Only a process
            // in the parent namespace may write such a map.
            let written = identity_maps().and_then(|(uids, gids)| {
                std::fs::write(format!("/proc/{pid}/uid_map"), uids)?;
                std::fs::write(format!("/proc/{pid}/gid_map"), gids)
            });
            if written.is_ok() {
                let _ = std::fs::File::from(to_child).write_all_once(b"m");
            }
            // On failure `to_child` closes, the last write end of W's pipe (W closed its copy
            // before it waits): W's read ends, and it reports the step and exits.
        }
    }
    let mut record = [0u8; 8];
    let got = read_full(&error_read, &mut record);
    if got == 0 {
        return Ok(pid);
    }
    let mut status = 0;
    // SAFETY: reaping our own child, which failed before exec.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let error = StepError::decode(record);
    Err(io::Error::new(error.io_error().kind(), error))
}

/// Whether this process may have a controlling terminal, asked at each spawn (a session leader
/// without one acquires one by opening a terminal): `open("/dev/tty")` fails with `ENXIO`
/// exactly when it has none. Any other failure counts as a terminal, so the command gets a
/// session of its own.
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

/// `/dev/null` opened once for every command's stdin (read-only, close-on-exec: the child
/// dups it onto fd 0, which clears the flag there only), instead of an open and a close per
/// spawn. Never closed; a failed open is not kept, so the next spawn tries again.
fn dev_null() -> io::Result<RawFd> {
    use std::sync::OnceLock;
    static NULL: OnceLock<OwnedFd> = OnceLock::new();
    if let Some(fd) = NULL.get() {
        return Ok(fd.as_raw_fd());
    }
    let opened: OwnedFd = std::fs::File::open("/dev/null")?.into();
    Ok(NULL.get_or_init(|| opened).as_raw_fd())
}

trait WriteOnce {
    fn write_all_once(self, bytes: &[u8]) -> io::Result<()>;
}

impl WriteOnce for std::fs::File {
    fn write_all_once(mut self, bytes: &[u8]) -> io::Result<()> {
        io::Write::write_all(&mut self, bytes)
    }
}

/// Reads until `buf` is full or EOF; returns how many bytes came.
pub(crate) fn read_full(fd: &OwnedFd, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        let rest = &mut buf[got..];
        // SAFETY: read into our buffer.
        let n = unsafe { libc::read(fd.as_raw_fd(), rest.as_mut_ptr().cast(), rest.len()) };
        if n > 0 {
            got += n as usize;
        } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        } else {
            break;
        }
    }
    got
}

/// Runs jobs on one long-lived thread: a child's parent-death signal is tied to the thread that
/// forked it, and the runtime's workers must not wait for a sandbox to be built.
pub(crate) fn on_spawner_thread(job: Box<dyn FnOnce() + Send>) {
    use std::sync::mpsc;
    use std::sync::{Mutex, OnceLock};
    type Job = Box<dyn FnOnce() + Send>;
    static JOBS: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    let sender = JOBS.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let started = std::thread::Builder::new()
            .name("acp-bash-spawner".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                    // Queued jobs first; then, with nothing to start, what the next command
                    // can find made already.
                    while let Ok(job) = rx.try_recv() {
                        job();
                    }
                    super::cgroup::make_spares();
                    super::cgroup_v2::make_spares();
                    super::landlock::make_spares();
                }
            });
        if let Err(error) = started {
            tracing::error!(%error, "no thread to start commands on");
        }
        Mutex::new(tx)
    });
    let sent = sender.lock().map(|tx| tx.send(job));
    match sent {
        Ok(Ok(())) => {}
        Ok(Err(mpsc::SendError(job))) => job(),
        Err(_) => tracing::error!("the spawner's queue is poisoned"),
    }
}

#[cfg(test)]
mod tests {
    use super::identity_map;

    #[test]
    fn an_identity_map_keeps_the_ids_a_namespace_has() {
        assert_eq!(
            identity_map("         0          0 4294967295\n").unwrap(),
            "0 0 4294967295\n"
        );
        // Rootless podman: root is the user, the rest its sub-ids.
        assert_eq!(
            identity_map("         0       1000          1\n         1     100000      65536\n")
                .unwrap(),
            "0 0 1\n1 1 65536\n"
        );
        assert!(identity_map("").is_err());
        assert!(identity_map("0 0\n").is_err());
    }
}
