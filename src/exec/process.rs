//! Starting `bash` in its own process group with one pipe for stdout and stderr, and signalling
//! that group.
//!
//! Owns: the engine's side of starting a command (the output pipe, the fds the shell gets,
//! waiting for the child through a pidfd). The fork-to-exec code itself lives in one place,
//! `sandbox::spawn` (`src/sandbox/linux/child/`), which the engine calls on a thread of its own
//! so that building one command's sandbox never stalls the runtime (or, for a bare command, on
//! the calling thread where the engine allows it: [`ForkOn`]). Must not touch: reading
//! output, timeouts, cwd tracking.

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use crate::sandbox::Confined;

/// A started shell: the child, its process group id, the read end of its output pipe and the
/// environment it was started with (handed back, so that the run need not copy it beforehand).
pub struct Started {
    pub child: Child,
    pub pgid: i32,
    pub output: tokio::net::unix::pipe::Receiver,
    pub env: Vec<(OsString, OsString)>,
    /// Keeps the session's sandbox helpers while the command runs (dropped with this).
    pub _in_use: Option<crate::sandbox::InUse>,
}

/// A started shell process (the platform's handle on it).
pub struct Child(crate::sandbox::SpawnedChild);

impl Child {
    /// Waits for the shell to exit (cancel-safe: can be polled again after being dropped).
    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.0.wait().await
    }
}

/// Where a command is forked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkOn {
    /// The sandbox's spawner thread, always (the engine's default).
    SpawnerThread,
    /// The calling thread for a command with nothing to confine ([`Confined::is_bare`]), as
    /// tokio's own `Command` does; the spawner thread for the others
    /// ([`EngineConfig::fork_bare_commands_in_place`](super::EngineConfig)).
    CallingThreadWhenBare,
}

/// Starts `confined` with exactly `env`, in `cwd`; each `(fd, number)` of `pass` appears in the
/// shell as that number. The fork happens on the sandbox's spawner thread, or, for a bare
/// command where `fork_on` says so, right here (the thread waits only until the shell has
/// exec'd: `CLONE_VFORK`).
pub async fn start(
    confined: Confined,
    env: Vec<(OsString, OsString)>,
    cwd: PathBuf,
    pass: Vec<(OwnedFd, i32)>,
    session: Option<std::sync::Arc<crate::sandbox::SessionSandbox>>,
    fork_on: ForkOn,
) -> std::io::Result<Started> {
    let (reader, writer) = std::io::pipe()?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let here = fork_on == ForkOn::CallingThreadWhenBare && confined.is_bare();
    let job = move || {
        // Counted before the spawn takes the session's lock: its helpers cannot end under it.
        let in_use = session.as_ref().map(crate::sandbox::SessionSandbox::in_use);
        let borrowed: Vec<_> = pass.iter().map(|(fd, n)| (fd.as_fd(), *n)).collect();
        let request = crate::sandbox::SpawnRequest {
            env: &env,
            cwd: &cwd,
            output: writer.as_fd(),
            pass: &borrowed,
            session: session.as_deref(),
        };
        let result = crate::sandbox::spawn_watched(&confined, &request);
        // Our copies of the pipe's write end and the passed fds close here: the pipe closes
        // when the command's processes are gone.
        drop(borrowed);
        drop((writer, pass, confined));
        let started = result.is_ok();
        let _ = tx.send(result.map(|spawned| (spawned, env, in_use)));
        // After the command has its answer: the helpers of sessions beyond the bound end.
        if let (Some(session), true) = (session, started) {
            session.used();
        }
    };
    if here {
        job();
    } else {
        crate::sandbox::on_spawner_thread(Box::new(job));
    }
    let (spawned, env, in_use) = rx
        .await
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))??;
    let pid = spawned.pid;
    let child = crate::sandbox::SpawnedChild::new(spawned)?;
    let output = tokio::net::unix::pipe::Receiver::from_owned_fd(reader.into())?;
    Ok(Started {
        child: Child(child),
        pgid: pid,
        output,
        env,
        _in_use: in_use,
    })
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

/// Whether the group `pgid` has no member left that still runs: none at all (`kill(-pgid, 0)`
/// fails), or, on Linux, only zombies (a process that has exited and waits to be reaped, by an
/// init that may be slow to do so, runs nothing).
pub fn group_gone(pgid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks; it has no memory-safety preconditions.
    pgid <= 0 || unsafe { libc::kill(-pgid, 0) } == -1 || only_zombies_in(pgid)
}

/// Whether every process of group `pgid` is a zombie (Linux: from `/proc/*/stat`). Elsewhere
/// `false`: the wait is then for the group to be reaped, still bounded.
#[cfg(target_os = "linux")]
fn only_zombies_in(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`: comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|end| &stat[end + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let (state, _ppid, pgrp) = (fields.next(), fields.next(), fields.next());
        if pgrp.and_then(|p| p.parse::<i32>().ok()) == Some(pgid) && state != Some("Z") {
            return false;
        }
    }
    true
}

#[cfg(not(target_os = "linux"))]
fn only_zombies_in(_pgid: i32) -> bool {
    false
}

/// Waits until the group `pgid` is gone ([`group_gone`]), at most `bound`: a SIGKILLed process
/// is gone only once the kernel has run its exit, which on a busy machine comes later than the
/// kill. `false`: some member was still there after `bound`.
pub async fn wait_until_group_gone(pgid: i32, bound: std::time::Duration) -> bool {
    let give_up = tokio::time::Instant::now() + bound;
    let mut pause = std::time::Duration::from_micros(250);
    while !group_gone(pgid) {
        if tokio::time::Instant::now() >= give_up {
            return false;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_millis(10));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::{self, Launch, Limits, Mode, Roots, Support};
    use tokio::io::AsyncReadExt;

    fn launch(program: &str, script: &str) -> Launch {
        Launch {
            program: program.into(),
            args: vec!["-c".into(), script.into()],
        }
    }

    async fn run(
        launch: Launch,
        mode: Mode,
        fork_on: ForkOn,
    ) -> (String, std::process::ExitStatus, i32) {
        let env = vec![("PATH".into(), "/usr/bin:/bin".into())];
        let roots = Roots::new("/", std::env::temp_dir());
        let confined = sandbox::confine_with(
            launch,
            mode,
            &roots,
            Limits::default(),
            &Support::none("test: the plain path"),
        );
        let mut started = start(confined, env, "/".into(), Vec::new(), None, fork_on)
            .await
            .unwrap();
        let mut output = String::new();
        started.output.read_to_string(&mut output).await.unwrap();
        let status = started.child.wait().await.unwrap();
        (output, status, started.pgid)
    }

    /// Both ways of starting give the same shell: own group, default SIGPIPE (the agent ignores
    /// it), stdin empty, stderr on the same pipe, the exit code.
    #[tokio::test]
    async fn both_start_paths_give_the_same_shell() {
        // The group from /proc where there is one (Linux), else from ps (macOS).
        let script = "echo pgid=$({ cut -d' ' -f5 /proc/$$/stat || ps -o pgid= -p $$; } \
                      2>/dev/null | tr -d ' ') pid=$$; yes | head -n 1; cat; echo err >&2; exit 3";
        let plain = run(
            launch("/bin/bash", script),
            Mode::Off,
            ForkOn::SpawnerThread,
        )
        .await;
        let here = run(
            launch("/bin/bash", script),
            Mode::Off,
            ForkOn::CallingThreadWhenBare,
        )
        .await;
        let forked = run(
            launch("/bin/bash", script),
            Mode::Full,
            ForkOn::CallingThreadWhenBare,
        )
        .await;
        for (output, status, pgid) in [plain, here] {
            assert_eq!(status.code(), Some(3), "{output}");
            assert_eq!(output, format!("pgid={pgid} pid={pgid}\ny\nerr\n"));
        }
        // Confined without namespaces (a subreaper between): the shell is W's child, in W's
        // group.
        let (output, status, pgid) = forked;
        assert_eq!(status.code(), Some(3), "{output}");
        assert!(
            output.starts_with(&format!("pgid={pgid} pid=")) && output.ends_with("\ny\nerr\n"),
            "{output}"
        );
    }

    #[tokio::test]
    async fn a_program_that_cannot_be_run_is_an_error_of_its_kind() {
        let roots = Roots::new("/", std::env::temp_dir());
        let confine = |launch| {
            sandbox::confine_with(
                launch,
                Mode::Off,
                &roots,
                Limits::default(),
                Support::current(),
            )
        };
        let missing = start(
            confine(launch("/nonexistent/bash", "true")),
            Vec::new(),
            "/".into(),
            Vec::new(),
            None,
            ForkOn::SpawnerThread,
        )
        .await;
        assert_eq!(missing.err().unwrap().kind(), std::io::ErrorKind::NotFound);
        let not_a_dir = start(
            confine(launch("/bin/bash", "true")),
            Vec::new(),
            "/nonexistent".into(),
            Vec::new(),
            None,
            ForkOn::SpawnerThread,
        )
        .await;
        assert_eq!(
            not_a_dir.err().unwrap().kind(),
            std::io::ErrorKind::NotFound
        );
    }

    /// A command of `mode` started from a thread of its own that then exits, once that thread
    /// is gone from `/proc/self/task` (its exit, and the parent-death signals it sends, are
    /// done by then): its pid, its start, whether it was bare, and the ends of two pipes it
    /// holds as fds 3 and 4. Given a line on the first, it answers `alive` on the second, then
    /// sleeps.
    ///
    /// Linux only: the parent-death signal it is about is a thread's.
    #[cfg(target_os = "linux")]
    fn start_from_a_thread_that_exits(fork_on: ForkOn, mode: Mode) -> FromAThread {
        let (go_read, go) = std::io::pipe().unwrap();
        let (reply, reply_write) = std::io::pipe().unwrap();
        let pass = vec![(go_read.into(), 3), (reply_write.into(), 4)];
        let (started, tid, bare) = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let roots = Roots::new("/", std::env::temp_dir());
            let confined = sandbox::confine_with(
                launch(
                    "/bin/bash",
                    "read -r _ <&3 && echo alive >&4; exec sleep 30",
                ),
                mode,
                &roots,
                Limits::default(),
                Support::current(),
            );
            let bare = confined.is_bare();
            let env = vec![("PATH".into(), "/usr/bin:/bin".into())];
            let started = runtime
                .block_on(start(confined, env, "/".into(), pass, None, fork_on))
                .unwrap();
            // SAFETY: gettid has no preconditions.
            (started, unsafe { libc::gettid() }, bare)
        })
        .join()
        .unwrap();
        let task = format!("/proc/self/task/{tid}");
        while std::path::Path::new(&task).exists() {
            std::thread::yield_now();
        }
        FromAThread {
            pid: started.pgid,
            started,
            bare,
            go,
            reply: std::io::BufReader::new(reply),
        }
    }

    #[cfg(target_os = "linux")]
    struct FromAThread {
        pid: i32,
        #[allow(dead_code)] // held: its pipe and pidfd close after the test's checks
        started: Started,
        bare: bool,
        go: std::io::PipeWriter,
        reply: std::io::BufReader<std::io::PipeReader>,
    }

    #[cfg(target_os = "linux")]
    impl FromAThread {
        /// Whether the command answers (`false`: its end of the pipe closed, it is gone).
        fn answers(&mut self) -> bool {
            use std::io::{BufRead, Write};
            let _ = self.go.write_all(b"go\n");
            let mut line = String::new();
            let _ = self.reply.read_line(&mut line);
            line == "alive\n"
        }

        /// Kills and reaps it; its wait status.
        fn kill_and_reap(self) -> i32 {
            let mut status = 0;
            signal_group(self.pid, libc::SIGKILL);
            // SAFETY: kill and waitpid on our own child.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            assert_eq!(unsafe { libc::waitpid(self.pid, &mut status, 0) }, self.pid);
            status
        }
    }

    /// The parent-death signal is the thread's: a bare command forked in place dies with the
    /// thread that started it, which is why forking in place is the engine's choice to make
    /// (`EngineConfig::fork_bare_commands_in_place`), and one forked on the spawner thread
    /// outlives it. A sandboxed command is forked on the spawner thread whatever the choice.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_bare_command_forked_in_place_lives_as_long_as_its_thread_and_no_longer() {
        let mut here = start_from_a_thread_that_exits(ForkOn::CallingThreadWhenBare, Mode::Off);
        assert!(
            !here.answers(),
            "forked in place, the command outlived its thread"
        );
        let status = here.kill_and_reap();
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL,
            "status {status:#x}"
        );

        let mut spawner = start_from_a_thread_that_exits(ForkOn::SpawnerThread, Mode::Off);
        assert!(
            spawner.answers(),
            "forked on the spawner thread, the command died with the caller's thread"
        );
        spawner.kill_and_reap();

        let mut sandboxed =
            start_from_a_thread_that_exits(ForkOn::CallingThreadWhenBare, Mode::Full);
        // `full` always has a plan: at least its subreaper (see `both_start_paths_…`).
        assert!(!sandboxed.bare, "full started bare");
        assert!(
            sandboxed.answers(),
            "a sandboxed command was forked in place and died with the caller's thread"
        );
        sandboxed.kill_and_reap();
    }
}
