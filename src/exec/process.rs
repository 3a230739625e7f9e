//! Starting `bash` in its own process group with one pipe for stdout and stderr, and signalling
//! that group.
//!
//! Owns: the fork/exec setup (stdin from /dev/null, merged output, process group, parent-death
//! signal, the sandbox's pre-exec step). Must not touch: reading output, timeouts, cwd tracking.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;

use crate::sandbox::{Launch, PreExec};

/// A started shell: the child, its process group id and the read end of its output pipe.
pub struct Started {
    pub child: tokio::process::Child,
    pub pgid: i32,
    pub output: tokio::net::unix::pipe::Receiver,
}

/// Starts `launch` with exactly `env`, in `cwd`.
pub fn start(
    launch: &Launch,
    pre_exec: Option<PreExec>,
    env: impl IntoIterator<Item = (OsString, OsString)>,
    cwd: &Path,
) -> std::io::Result<Started> {
    let (reader, writer) = std::io::pipe()?;
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
    let child = command.spawn()?;
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
