//! Baselines: the same work without the agent, measured in the same run.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const BASH: &str = "/bin/bash";

/// `bash -c script` with no input and output discarded: how long until it has exited.
pub fn bash_to_devnull(script: &str) -> Duration {
    let started = Instant::now();
    let status = Command::new(BASH)
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("bash runs");
    assert!(status.success(), "bash -c {script:?} failed: {status}");
    started.elapsed()
}

/// `bash -c script` with stdout and stderr on one pipe that this process drains in 64 KiB reads
/// and throws away: the least any agent reading a command's output pipe has to pay.
/// Returns the time to exit and the bytes read.
pub fn bash_to_pipe_reader(script: &str) -> (Duration, u64) {
    let started = Instant::now();
    let (mut reader, writer) = std::io::pipe().expect("a pipe");
    let mut child = Command::new(BASH)
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
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
    let mut child = Command::new(BASH)
        .arg("-c")
        .arg(script)
        .stdin(Stdio::null())
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
            Command::new(BASH)
                .arg("-c")
                .arg(script)
                .stdin(Stdio::null())
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
