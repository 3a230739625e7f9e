//! Starting `bash` in its own process group with one pipe for stdout and stderr, and signalling
//! that group.
//!
//! Owns: the fork/exec setup (stdin from /dev/null, merged output, process group, parent-death
//! signal, the sandbox's pre-exec step). Must not touch: reading output, timeouts, cwd tracking.
//!
//! Two ways to start, same result. With a sandbox step (arbitrary code between fork and exec),
//! `std::process::Command` with `pre_exec`, which forks. Without one (sandbox mode `off`, or no
//! layer available) on Linux, `vfork_spawn`: the child shares the agent's memory and the agent
//! waits until it has exec'd, as `posix_spawn` does, but it also arms the parent-death signal,
//! which `posix_spawn` cannot. Forking copies the agent's page tables and makes every page the
//! agent writes next take a copy-on-write fault: about 0.5 ms per command measured here
//! (`cargo bench -- engine-overhead`).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;

use crate::sandbox::{Launch, PreExec};

/// A started shell: the child, its process group id and the read end of its output pipe.
pub struct Started {
    pub child: Child,
    pub pgid: i32,
    pub output: tokio::net::unix::pipe::Receiver,
}

/// A started shell process, however it was started.
pub enum Child {
    Tokio(tokio::process::Child),
    #[cfg(target_os = "linux")]
    Spawned(linux::SpawnedChild),
}

impl Child {
    /// Waits for the shell to exit (cancel-safe: can be polled again after being dropped).
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Child::Tokio(child) => child.wait().await,
            #[cfg(target_os = "linux")]
            Child::Spawned(child) => child.wait().await,
        }
    }

    fn id(&self) -> Option<u32> {
        match self {
            Child::Tokio(child) => child.id(),
            #[cfg(target_os = "linux")]
            Child::Spawned(child) => Some(child.pid as u32),
        }
    }
}

/// Starts `launch` with exactly `env`, in `cwd`.
pub fn start(
    launch: &Launch,
    pre_exec: Option<PreExec>,
    env: impl IntoIterator<Item = (OsString, OsString)>,
    cwd: &Path,
) -> std::io::Result<Started> {
    let (reader, writer) = std::io::pipe()?;
    #[cfg(target_os = "linux")]
    if pre_exec.is_none() && launch.program.is_absolute() {
        let pid = linux::vfork_spawn(launch, env, cwd, &writer)?;
        drop(writer);
        let child = linux::SpawnedChild::new(pid)?;
        let output = tokio::net::unix::pipe::Receiver::from_owned_fd(reader.into())?;
        return Ok(Started {
            child: Child::Spawned(child),
            pgid: pid,
            output,
        });
    }
    let mut command = std::process::Command::new(&launch.program);
    command
        .args(&launch.args)
        .env_clear()
        .envs(env)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer.try_clone()?))
        .stderr(Stdio::from(writer))
        .process_group(0);
    let parent = std::process::id() as libc::pid_t;
    let mut sandbox_step = pre_exec;
    // SAFETY: the closure runs between fork and exec and makes only async-signal-safe calls
    // (prctl, getppid, _exit), plus the sandbox's step, which promises the same.
    unsafe {
        command.pre_exec(move || {
            die_with_parent(parent);
            match sandbox_step.as_mut() {
                Some(step) => step(),
                None => Ok(()),
            }
        });
    }
    let mut command = tokio::process::Command::from(command);
    let child = Child::Tokio(command.spawn()?);
    // `command` still holds the pipe's write ends: drop them so the pipe closes when the
    // command's processes are gone.
    drop(command);
    let pgid = child.id().map(|id| id as i32).unwrap_or(0);
    let output = tokio::net::unix::pipe::Receiver::from_owned_fd(reader.into())?;
    Ok(Started {
        child,
        pgid,
        output,
    })
}

/// Asks the kernel to SIGKILL this child when the agent dies, so a crashed agent leaves no
/// shell behind (Linux). The signal is tied to the thread that forked: spawn from a long-lived
/// runtime worker, never from a short-lived blocking-pool thread.
fn die_with_parent(parent: libc::pid_t) {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl, getppid and _exit are async-signal-safe.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(127); // the agent died before the signal was armed
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = parent;
}

/// Sends `signal` to every process in the group `pgid`. A group that is already gone is fine.
pub fn signal_group(pgid: i32, signal: i32) {
    if pgid > 0 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::{CString, OsString};
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::ExitStatusExt;
    use std::path::Path;
    use std::sync::atomic::{AtomicI32, Ordering};

    use tokio::io::unix::AsyncFd;

    use crate::sandbox::Launch;

    /// Everything the child needs, prepared by the parent: the child may not allocate.
    struct ChildArgs {
        program: CString,
        argv: Vec<*const libc::c_char>,
        envp: Vec<*const libc::c_char>,
        cwd: CString,
        stdin: libc::c_int,
        output: libc::c_int,
        parent: libc::pid_t,
        /// The errno of the step that failed in the child (0: it exec'd).
        error: AtomicI32,
    }

    fn cstring(bytes: &[u8]) -> io::Result<CString> {
        CString::new(bytes).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "nul byte found in provided data",
            )
        })
    }

    /// Starts `launch` (an absolute program path) in a new process group, with exactly `env`,
    /// in `cwd`, stdin from /dev/null and stdout + stderr on `output`, the parent-death signal
    /// armed. Returns once the child has exec'd (or failed to).
    pub fn vfork_spawn(
        launch: &Launch,
        env: impl IntoIterator<Item = (OsString, OsString)>,
        cwd: &Path,
        output: &impl AsRawFd,
    ) -> io::Result<libc::pid_t> {
        let program = cstring(launch.program.as_os_str().as_bytes())?;
        let mut args = vec![program.clone()];
        for arg in &launch.args {
            args.push(cstring(arg.as_bytes())?);
        }
        let mut vars = Vec::new();
        for (name, value) in env {
            let mut pair = name.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            vars.push(cstring(&pair)?);
        }
        let null = std::fs::File::open("/dev/null")?;
        let mut child_args = ChildArgs {
            argv: args
                .iter()
                .map(|a| a.as_ptr())
                .chain([std::ptr::null()])
                .collect(),
            envp: vars
                .iter()
                .map(|v| v.as_ptr())
                .chain([std::ptr::null()])
                .collect(),
            program,
            cwd: cstring(cwd.as_os_str().as_bytes())?,
            stdin: null.as_raw_fd(),
            output: output.as_raw_fd(),
            parent: std::process::id() as libc::pid_t,
            error: AtomicI32::new(0),
        };
        let mut stack = vec![0u8; 64 * 1024];
        // The stack grows down; keep the top 16-byte aligned.
        let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
        // SAFETY: all signals are blocked around the clone so that no handler of the agent
        // runs in the child, which shares the agent's memory until it execs; the child only
        // makes raw system calls on data prepared above (no allocation, no locks), and
        // CLONE_VFORK keeps this frame (and `stack`, `child_args`) alive until it has exec'd
        // or exited.
        let pid = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            let pid = libc::clone(
                child_main,
                top as *mut libc::c_void,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                &mut child_args as *mut ChildArgs as *mut libc::c_void,
            );
            let clone_error = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            if pid < 0 {
                return Err(clone_error);
            }
            pid
        };
        drop(stack);
        let error = child_args.error.load(Ordering::SeqCst);
        if error != 0 {
            // The child exited without exec'ing: reap it and report why.
            let mut status = 0;
            // SAFETY: waitpid on our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            return Err(io::Error::from_raw_os_error(error));
        }
        Ok(pid)
    }

    /// The child, between clone and exec: raw system calls only.
    extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the parent's `ChildArgs`, alive until we exec or exit (CLONE_VFORK).
        unsafe {
            let args = &*(arg as *const ChildArgs);
            let fail = |args: &ChildArgs| -> ! {
                let errno = *libc::__errno_location();
                args.error.store(
                    if errno == 0 { libc::EINVAL } else { errno },
                    Ordering::SeqCst,
                );
                libc::_exit(127)
            };
            // Handlers are the agent's: back to the defaults before the mask opens (exec would
            // reset them too, but a signal could land before it). SIGPIPE is ignored by the
            // Rust runtime and ignoring survives exec: the shell gets the default, as std gives.
            for signal in 1..=libc::SIGRTMAX() {
                if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                    continue;
                }
                let mut action: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, std::ptr::null(), &mut action) != 0 {
                    continue;
                }
                let ignored = action.sa_sigaction == libc::SIG_IGN;
                if action.sa_sigaction != libc::SIG_DFL && (!ignored || signal == libc::SIGPIPE) {
                    action.sa_sigaction = libc::SIG_DFL;
                    action.sa_flags = 0;
                    libc::sigaction(signal, &action, std::ptr::null_mut());
                }
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());

            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != args.parent {
                libc::_exit(127); // the agent died before the signal was armed
            }
            if libc::setpgid(0, 0) != 0 {
                fail(args);
            }
            for (from, to) in [(args.stdin, 0), (args.output, 1), (args.output, 2)] {
                if from == to {
                    // dup2 would keep close-on-exec: clear it.
                    if libc::fcntl(to, libc::F_SETFD, 0) != 0 {
                        fail(args);
                    }
                } else if libc::dup2(from, to) < 0 {
                    fail(args);
                }
            }
            if libc::chdir(args.cwd.as_ptr()) != 0 {
                fail(args);
            }
            libc::execve(
                args.program.as_ptr(),
                args.argv.as_ptr(),
                args.envp.as_ptr(),
            );
            fail(args)
        }
    }

    /// A child started by [`vfork_spawn`], waited for through a pidfd (Linux 5.3+), or on a
    /// blocking thread where pidfds are not available.
    pub struct SpawnedChild {
        pub pid: libc::pid_t,
        waiter: Waiter,
        reaped: bool,
    }

    enum Waiter {
        PidFd(AsyncFd<OwnedFd>),
        Thread(tokio::task::JoinHandle<io::Result<std::process::ExitStatus>>),
    }

    impl SpawnedChild {
        pub fn new(pid: libc::pid_t) -> io::Result<SpawnedChild> {
            // SAFETY: pidfd_open has no memory-safety preconditions.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
            let waiter = if fd >= 0 {
                // SAFETY: a new fd we own; the AsyncFd owns it from here on and nothing else
                // closes or replaces it.
                let registered = unsafe {
                    let fd = OwnedFd::from_raw_fd(fd);
                    AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
                };
                Waiter::PidFd(registered?)
            } else {
                Waiter::Thread(tokio::task::spawn_blocking(move || loop {
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
                }))
            };
            Ok(SpawnedChild {
                pid,
                waiter,
                reaped: false,
            })
        }

        pub async fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
            let status = match &mut self.waiter {
                Waiter::PidFd(fd) => loop {
                    let mut ready = fd.readable().await?;
                    let mut status = 0;
                    // SAFETY: waitpid on our own child.
                    let reaped = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
                    if reaped == self.pid {
                        break Ok(std::process::ExitStatus::from_raw(status));
                    }
                    if reaped == 0 {
                        ready.clear_ready();
                        continue;
                    }
                    let error = io::Error::last_os_error();
                    if error.kind() != io::ErrorKind::Interrupted {
                        break Err(error);
                    }
                },
                Waiter::Thread(handle) => match handle.await {
                    Ok(result) => result,
                    Err(error) => Err(io::Error::other(error)),
                },
            };
            self.reaped = true;
            status
        }
    }

    impl Drop for SpawnedChild {
        /// A run dropped before its shell was reaped: reap it when it exits (no zombie left),
        /// as tokio does for its own children.
        fn drop(&mut self) {
            if self.reaped || matches!(self.waiter, Waiter::Thread(_)) {
                return;
            }
            let pid = self.pid;
            std::thread::spawn(move || {
                let mut status = 0;
                // SAFETY: waitpid on our own child.
                while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
                    && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
                {
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn launch(program: &str, script: &str) -> Launch {
        Launch {
            program: program.into(),
            args: vec!["-c".into(), script.into()],
        }
    }

    async fn run(
        launch: &Launch,
        pre_exec: Option<PreExec>,
    ) -> (String, std::process::ExitStatus, i32) {
        let env = [("PATH".into(), "/usr/bin:/bin".into())];
        let mut started = start(launch, pre_exec, env, Path::new("/")).unwrap();
        let mut output = String::new();
        started.output.read_to_string(&mut output).await.unwrap();
        let status = started.child.wait().await.unwrap();
        (output, status, started.pgid)
    }

    /// Both ways of starting give the same shell: own group, default SIGPIPE (the agent ignores
    /// it), stdin empty, stderr on the same pipe, the exit code.
    #[tokio::test]
    async fn both_start_paths_give_the_same_shell() {
        let script = "echo pgid=$(cut -d' ' -f5 /proc/$$/stat) pid=$$; yes | head -n 1; \
                      cat; echo err >&2; exit 3";
        let plain = run(&launch("/bin/bash", script), None).await;
        let forked = run(
            &launch("/bin/bash", script),
            Some(Box::new(|| Ok(())) as PreExec),
        )
        .await;
        for (output, status, pgid) in [plain, forked] {
            assert_eq!(status.code(), Some(3), "{output}");
            assert!(
                output == format!("pgid={pgid} pid={pgid}\ny\nerr\n"),
                "{output}"
            );
        }
    }

    #[tokio::test]
    async fn a_program_that_cannot_be_run_is_an_error_of_its_kind() {
        let env = Vec::<(OsString, OsString)>::new();
        let missing = start(
            &launch("/nonexistent/bash", "true"),
            None,
            env.clone(),
            Path::new("/"),
        );
        assert_eq!(missing.err().unwrap().kind(), std::io::ErrorKind::NotFound);
        let not_a_dir = start(
            &launch("/bin/bash", "true"),
            None,
            env,
            Path::new("/nonexistent"),
        );
        assert_eq!(
            not_a_dir.err().unwrap().kind(),
            std::io::ErrorKind::NotFound
        );
    }
}
