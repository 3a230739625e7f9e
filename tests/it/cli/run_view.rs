//! `acp-bash run` shows what a client would: the agent's messages (slash commands' answers, the
//! nothing-to-run hint) with exit status 0, and with `--plain` the live console view while the
//! command runs, not only the final block.

use std::process::{Command, Output, Stdio};

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};

use crate::support::acp::*;

fn run(script: &str) -> Output {
    let (_tmp, dir) = temp_dir();
    Command::new(binary())
        .args(["run", "--sandbox", "full", "--", script])
        .current_dir(&dir)
        .output()
        .unwrap()
}

#[test]
fn run_prints_what_the_agent_says_and_a_message_only_turn_exits_0() {
    for (script, says) in [
        ("/help", "`/bg SCRIPT`"),
        ("", "Nothing to run"),
        ("# only a comment", "Nothing to run"),
        ("/jobs", "No background jobs"),
        ("/bg sleep 0.1", "Started job 1"),
    ] {
        let output = run(script);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stdout.contains(says),
            "{script:?} prints {says:?}: {stdout:?} {stderr}"
        );
        assert!(
            stdout.ends_with('\n'),
            "{script:?}: whole lines: {stdout:?}"
        );
        assert_eq!(
            output.status.code(),
            Some(0),
            "{script:?}: {stdout} {stderr}"
        );
    }
    // A job's turn ends at once; `run` says that its job ends with it.
    let output = run("/bg sleep 0.1");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("ends with this run"),
        "{output:?}"
    );
    // A command's own status still decides.
    assert_eq!(run("exit 4").status.code(), Some(4));
}

/// The command prints a line, then waits on a fifo that only the test writes: the line shows in
/// `run --plain`'s output while the command still runs.
#[tokio::test]
async fn run_plain_shows_the_live_view_while_the_command_runs() {
    let (_tmp, dir) = temp_dir();
    let fifo = dir.join("go");
    crate::support::engine::mkfifo(&fifo);
    let mut run = tokio::process::Command::new(binary())
        .args([
            "run",
            "--plain",
            "--sandbox",
            "full",
            "--",
            "echo first-line; read -r _ < go; echo second-line",
        ])
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(run.stdout.take().unwrap());
    let mut seen = String::new();
    guard("the live view before the command ends", async {
        let mut line = String::new();
        while line != "first-line\n" {
            line.clear();
            assert_ne!(stdout.read_line(&mut line).await.unwrap(), 0, "{seen}");
            seen.push_str(&line);
        }
    })
    .await;
    assert!(seen.starts_with("```console\n"), "a console view: {seen}");
    assert!(!seen.contains("second-line"), "{seen}");
    // Only now may the command go on.
    let fifo_writer = std::thread::spawn(move || std::fs::write(fifo, "go\n"));
    let mut rest = String::new();
    guard("run's end", stdout.read_to_string(&mut rest))
        .await
        .unwrap();
    fifo_writer.join().unwrap().unwrap();
    let status = guard("run's exit", run.wait()).await.unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        rest.ends_with("first-line\nsecond-line\n[exit code: 0]\n```\n"),
        "the final block last: {rest}"
    );
}

/// On a terminal, `run --plain` redraws the live view in place: the next view (here the final
/// block) starts by moving the cursor up over the previous one and clearing to the end.
#[tokio::test]
async fn run_plain_on_a_terminal_redraws_the_live_view_in_place() {
    use std::io::Read as _;
    let (_tmp, dir) = temp_dir();
    let fifo = dir.join("go");
    crate::support::engine::mkfifo(&fifo);
    let (master, slave) = super::first_contact::openpty();
    let mut run = tokio::process::Command::new(binary())
        .args([
            "run",
            "--plain",
            "--sandbox",
            "full",
            "--",
            "echo one; read -r _ < go; echo two",
        ])
        .current_dir(&dir)
        .stdout(Stdio::from(slave))
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The terminal's output, read on a thread until the last writer is gone (EIO).
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut terminal = std::fs::File::from(master);
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = terminal.read(&mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    guard("the first live view on the terminal", async {
        while !String::from_utf8_lossy(&seen).contains("one\r\n```\r\n") {
            seen.extend(rx.recv().await.expect("more output"));
        }
    })
    .await;
    let fifo_writer = std::thread::spawn(move || std::fs::write(fifo, "go\n"));
    let status = guard("run's exit", run.wait()).await.unwrap();
    assert!(status.success(), "{status:?}");
    fifo_writer.join().unwrap().unwrap();
    drop(run);
    while let Some(chunk) = guard("the rest of the output", rx.recv()).await {
        seen.extend(chunk);
    }
    reader.join().unwrap();
    let text = String::from_utf8_lossy(&seen);
    assert!(
        text.contains("one\r\n```\r\n\x1b[3F\x1b[J```console\r\n"),
        "the three-line view is replaced in place: {text:?}"
    );
    assert!(
        text.ends_with("one\r\ntwo\r\n[exit code: 0]\r\n```\r\n"),
        "{text:?}"
    );
}

/// Issue 21, point 4: `run`'s card view prints how a command that did not simply exit ended,
/// in the words a plain client's block ends with, on a line of its own (the exit status is
/// still the command's).
#[test]
fn run_prints_the_status_line_of_a_timed_out_or_signalled_command() {
    let (_tmp, dir) = temp_dir();
    let output = Command::new(binary())
        .args(["run", "--sandbox", "full", "--timeout", "1s", "--"])
        .arg("echo started; exec sleep 30")
        .current_dir(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout, "started\n[timed out after 1s] [killed by signal: SIGTERM]\r\n",
        "{output:?}"
    );
    assert_eq!(output.status.code(), Some(143));
    let output = run("printf partial; kill -KILL $$");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout, "partial\r\n[killed by signal: SIGKILL]\r\n",
        "{output:?}"
    );
    assert_eq!(output.status.code(), Some(137));
}
