//! acp-bash driven by a real client it did not write: acpx (npm `acpx`, a headless ACP CLI),
//! asserting on what acpx prints, as its users read it.
//!
//! acpx is installed by `.ci/run` into `.ci/node` (or named by `ACPX=/path/to/acpx`). Where it is
//! not installed these tests say so on stderr and pass, unless `ACP_BASH_REQUIRE_ACPX=1` (which
//! `.ci/run` sets once it has installed acpx) makes a missing acpx a failure.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::acp::{binary, temp_dir};

/// The acpx binary, or `None` (with a notice) when it is not installed.
fn acpx() -> Option<PathBuf> {
    let path = std::env::var_os("ACPX")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/node/node_modules/.bin/acpx")
        });
    if path.exists() {
        return Some(path);
    }
    let why = format!(
        "acpx is not installed at {} (run .ci/run, or set ACPX=/path/to/acpx)",
        path.display()
    );
    if std::env::var_os("ACP_BASH_REQUIRE_ACPX").is_some_and(|v| v == "1") {
        panic!("{why}");
    }
    eprintln!("NOTICE: skipping the acpx test: {why}");
    None
}

/// `acpx --agent '<acp-bash> --sandbox full' ARGS…` in `dir`, with a private HOME (acpx keeps
/// its session records there).
fn command(acpx: &Path, dir: &Path, home: &Path, args: &[&str]) -> Command {
    let agent = format!("{} --sandbox full", binary().display());
    let mut command = Command::new(acpx);
    command
        .current_dir(dir)
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .args(["--agent", &agent, "--cwd", dir.to_str().unwrap()])
        .args(["--timeout", "60"])
        .args(args)
        .stdin(Stdio::null());
    command
}

struct Run {
    stdout: String,
    output: Output,
}

/// Runs `acpx … exec SCRIPT` to its end.
fn exec(acpx: &Path, script: &str) -> Run {
    let (_tmp, dir) = temp_dir();
    let (_home_tmp, home) = temp_dir();
    let output = command(acpx, &dir, &home, &["exec", script])
        .output()
        .expect("acpx runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    Run { stdout, output }
}

fn assert_done(run: &Run) {
    assert!(
        run.output.status.success() && run.stdout.contains("[done] end_turn"),
        "acpx failed: {:?}\nstdout:\n{}\nstderr:\n{}",
        run.output.status,
        run.stdout,
        String::from_utf8_lossy(&run.output.stderr)
    );
}

#[test]
fn acpx_shows_a_successful_command_and_its_output() {
    let Some(acpx) = acpx() else { return };
    let run = exec(&acpx, "echo hello");
    assert_done(&run);
    assert!(
        run.stdout.contains("[tool] echo hello (completed)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("```console\n    hello\n    [exit code: 0]\n    ```"),
        "{}",
        run.stdout
    );
}

/// acpx shows the first lines of a block only: the status must still be visible, as
/// `rawOutput`, which acpx prints before the content.
#[test]
fn acpx_shows_the_status_of_a_failure_with_long_output() {
    let Some(acpx) = acpx() else { return };
    let run = exec(&acpx, "seq 1 40; exit 3");
    assert_done(&run);
    let stdout = &run.stdout;
    assert!(
        stdout.contains("[tool] seq 1 40; exit 3 (failed)"),
        "{stdout}"
    );
    let raw = stdout
        .find("\"exit_code\": 3,")
        .expect("rawOutput's exit code");
    let console = stdout.find("```console").expect("the console block");
    assert!(raw < console, "the status comes first:\n{stdout}");
    assert!(stdout.contains("\"signal\": null"), "{stdout}");
    assert!(
        !stdout.contains("[exit code: 3]"),
        "acpx cut the block before its status line (if it no longer does, this test can go)"
    );
}

/// A multi-line script is a one-line title in acpx, and its lines are echoed in the block.
#[test]
fn acpx_shows_a_multi_line_script_as_a_one_line_title() {
    let Some(acpx) = acpx() else { return };
    let run = exec(&acpx, "mkdir -p out\ntouch out/a\nls out");
    assert_done(&run);
    assert!(
        run.stdout
            .contains("[tool] mkdir -p out … (2 more lines) (completed)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("    $ mkdir -p out\n    $ touch out/a\n    $ ls out\n    a\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn acpx_shows_what_to_type_for_a_comment_only_prompt() {
    let Some(acpx) = acpx() else { return };
    let run = exec(&acpx, "# just a comment");
    assert_done(&run);
    assert!(run.stdout.contains("Nothing to run"), "{}", run.stdout);
    assert!(!run.stdout.contains("[error]"), "{}", run.stdout);
}

/// `--format json` prints every update as it arrives: a command that prints, waits, and prints
/// again shows up as several live updates before the final one. The script waits for files the
/// test creates when acpx has printed each view, so nothing depends on timing.
#[test]
fn acpx_json_shows_live_updates_of_a_slow_command() {
    let Some(acpx) = acpx() else { return };
    let (_tmp, dir) = temp_dir();
    let (_home_tmp, home) = temp_dir();
    let script = "echo one\nwhile [ ! -e go1 ]; do sleep 0.01; done\necho two\n\
                  while [ ! -e go2 ]; do sleep 0.01; done\necho three";
    let mut child = command(&acpx, &dir, &home, &["--format", "json", "exec", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("acpx runs");
    let mut views = Vec::new();
    let mut finals = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.expect("acpx's stdout");
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let update = &message["params"]["update"];
        if update["sessionUpdate"] != "tool_call_update" {
            continue;
        }
        let text = update["content"]
            .as_array()
            .and_then(|c| c.last())
            .and_then(|c| c["content"]["text"].as_str())
            .unwrap_or_default()
            .to_string();
        if update.get("status").is_some() {
            finals.push(text);
            continue;
        }
        // (The script's own lines, echoed above the output, mention "one" and "two" too.)
        if text.ends_with("\none\ntwo\n```") {
            std::fs::write(dir.join("go2"), "").unwrap();
        } else if text.ends_with("\none\n```") {
            std::fs::write(dir.join("go1"), "").unwrap();
        }
        views.push(text);
    }
    assert!(child.wait().unwrap().success());
    assert!(
        views.len() >= 2,
        "live updates before the final one: {views:?}"
    );
    assert_eq!(views[0], "```console\n$ echo one\n$ while [ ! -e go1 ]; do sleep 0.01; done\n$ echo two\n$ while [ ! -e go2 ]; do sleep 0.01; done\n$ echo three\none\n```");
    assert!(
        views.iter().any(|v| v.ends_with("one\ntwo\n```")),
        "{views:?}"
    );
    assert_eq!(finals.len(), 1, "{finals:?}");
    assert!(
        finals[0].ends_with("one\ntwo\nthree\n[exit code: 0]\n```"),
        "{finals:?}"
    );
}
