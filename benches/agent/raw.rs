//! Baselines: the same work without the agent, measured in the same run.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const BASH: &str = "/bin/bash";

/// `bash -c script` with stdin from /dev/null; the caller sets stdout and stderr.
fn bash(script: &str) -> Command {
    let mut command = Command::new(BASH);
    command.arg("-c").arg(script).stdin(Stdio::null());
    command
}

/// `bash -c script` with no input and output discarded: how long until it has exited.
pub fn bash_to_devnull(script: &str) -> Duration {
    let started = Instant::now();
    let status = bash(script)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("bash runs");
    assert!(status.success(), "bash -c {script:?} failed: {status}");
    started.elapsed()
}

/// `bash -c script` with stdout and stderr appended straight to a new file at `path` (removed
/// afterwards): keeping the output, with no reader and no pipe at all. The agent must keep it too
/// (the full log), so this bounds what any agent can reach on this machine's page cache.
pub fn bash_to_file(script: &str, path: &std::path::Path) -> Duration {
    let started = Instant::now();
    let file = std::fs::File::create(path).expect("the output file");
    let status = bash(script)
        .stdout(file.try_clone().expect("dup"))
        .stderr(file)
        .status()
        .expect("bash runs");
    assert!(status.success(), "bash -c {script:?} failed: {status}");
    let elapsed = started.elapsed();
    let _ = std::fs::remove_file(path);
    elapsed
}

/// `bash -c script` with stdout and stderr on one pipe that this process drains in 64 KiB reads
/// and throws away: the least any agent reading a command's output pipe has to pay.
/// Returns the time to exit and the bytes read.
pub fn bash_to_pipe_reader(script: &str) -> (Duration, u64) {
    let started = Instant::now();
    let (mut reader, writer) = std::io::pipe().expect("a pipe");
    let mut child = bash(script)
        .stdout(writer.try_clone().expect("dup"))
        .stderr(writer)
        .spawn()
        .expect("bash runs");
    // The Command above is gone, so only the child holds the write ends now.
    let mut buffer = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("reading the pipe: {e}"),
        }
    }
    let status = child.wait().expect("wait");
    assert!(status.success());
    (started.elapsed(), total)
}

/// `bash -c script` with its output on a pipe: the time from spawning to the first byte read.
pub fn bash_first_output(script: &str) -> Duration {
    let started = Instant::now();
    let mut child = bash(script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("bash runs");
    let mut stdout = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    stdout.read_exact(&mut byte).expect("some output");
    let first = started.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    first
}

/// `count` × `bash -c script` started at once; the time until the last has exited.
pub fn bash_concurrent(script: &str, count: usize) -> Duration {
    let started = Instant::now();
    let children: Vec<_> = (0..count)
        .map(|_| {
            bash(script)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("bash runs")
        })
        .collect();
    for child in children {
        let output = child.wait_with_output().expect("wait");
        assert!(output.status.success());
    }
    started.elapsed()
}

/// A process that answers a JSON line with a line (`cat`): spawn → the echo of the `initialize`
/// line. Returns the time and the process's resident memory (KiB) once it answered.
pub fn cat_echo(line: &str) -> (Duration, u64) {
    let started = Instant::now();
    let mut child = Command::new("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cat runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(line.as_bytes()).unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.flush().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut echoed = String::new();
    reader.read_line(&mut echoed).unwrap();
    let elapsed = started.elapsed();
    let rss = super::stats::rss_kib(child.id())
        .map(|(rss, _)| rss)
        .unwrap_or(0);
    drop(stdin);
    let _ = child.wait();
    (elapsed, rss)
}

/// `bash -c true` started the way the engine starts its shell: by fork (a `pre_exec` step that
/// arms the parent-death signal rules out std's posix_spawn/vfork path), in its own process
/// group, optionally with the engine's `BASH_ENV` prelude writing its cwd file. Splits the
/// engine's per-command overhead into its parts.
pub fn bash_true_like_engine(prelude: Option<(&std::path::Path, &std::path::Path)>) -> Duration {
    use std::os::unix::process::CommandExt;
    let started = Instant::now();
    let mut command = Command::new(BASH);
    command
        .args(["-c", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    if let Some((prelude, cwd_file)) = prelude {
        command
            .env("BASH_ENV", prelude)
            .env("ACP_BASH_CWD_FILE", cwd_file);
    }
    // SAFETY: prctl is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let status = command.status().expect("bash runs");
    assert!(status.success());
    if let Some((_, cwd_file)) = prelude {
        let _ = std::fs::read(cwd_file);
        let _ = std::fs::remove_file(cwd_file);
    }
    started.elapsed()
}

/// The engine's prelude, taken from its source so that the two never differ.
pub fn engine_prelude() -> String {
    let source = include_str!("../../src/exec/prelude.rs");
    let from = source
        .find("fn prelude_text")
        .expect("the prelude's builder");
    let start = from + source[from..].find("r#\"").expect("the prelude literal") + 3;
    let end = start + source[start..].find("\"#").expect("its end");
    // The format string, filled the way the engine fills it (the eval'd texts left empty).
    source[start..end]
        .replace("{PRELUDE_FD}", "3")
        .replace("{CWD_FD}", "63")
        .replace("{TRAP_WRAPPER}", "")
        .replace("{EXIT_CHAIN}", "")
        .replace("{{", "{")
        .replace("}}", "}")
}

/// `bash -c true` started as the engine starts it in sandbox `mode`, through `sandbox::spawn`.
pub fn bash_true_confined(
    mode: acp_bash::sandbox::Mode,
    roots: &acp_bash::sandbox::Roots,
) -> Duration {
    bash_confined_with(mode, roots, acp_bash::sandbox::Support::current(), "true")
}

/// `bash -c script` confined by `mode` with the layers `support` says work (output to
/// /dev/null); how long from confining to reaped.
pub fn bash_confined_with(
    mode: acp_bash::sandbox::Mode,
    roots: &acp_bash::sandbox::Roots,
    support: &acp_bash::sandbox::Support,
    script: &str,
) -> Duration {
    use std::os::fd::AsFd;
    let started = Instant::now();
    let launch = acp_bash::sandbox::Launch::new(BASH, ["-c", script]);
    let confined = acp_bash::sandbox::confine_with(
        launch,
        mode,
        roots,
        acp_bash::sandbox::Limits::default(),
        support,
    );
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("/dev/null");
    let request = acp_bash::sandbox::SpawnRequest::new(&[], &roots.workspace, null.as_fd());
    let pid = acp_bash::sandbox::spawn(&confined, &request).expect("bash runs");
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "confined bash -c {script}: {status}"
    );
    started.elapsed()
}
