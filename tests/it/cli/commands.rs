//! The command line: `zed-config`, `run` (output and exit status through the real protocol),
//! `demo`, and `--help` that explains every flag.

use std::process::{Command, Output};

use serde_json::Value;

use crate::support::acp::*;

fn acp_bash(args: &[&str]) -> Output {
    let (_tmp, dir) = temp_dir();
    Command::new(binary())
        .args(args)
        .current_dir(&dir)
        .output()
        .expect("run acp-bash")
}

/// `--sandbox full` keeps machine-dependent sandbox notices out of the outputs these tests compare.
fn acp_bash_full(args: &[&str]) -> Output {
    let mut all = vec!["--sandbox", "full"];
    all.extend_from_slice(args);
    acp_bash(&all)
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

#[test]
fn zed_config_prints_a_custom_agent_server_with_this_binary() {
    let output = acp_bash(&["zed-config"]);
    assert!(output.status.success());
    let config: Value = serde_json::from_str(&stdout(&output)).expect("valid JSON");
    let server = &config["agent_servers"]["acp-bash"];
    assert_eq!(server["type"], "custom");
    let command = std::path::PathBuf::from(server["command"].as_str().unwrap());
    assert!(command.is_absolute());
    assert_eq!(
        command.canonicalize().unwrap(),
        binary().canonicalize().unwrap()
    );
    assert_eq!(server["args"], serde_json::json!([]));
}

#[test]
fn zed_config_carries_the_engine_flags_given() {
    let output = acp_bash(&["--timeout", "90s", "--sandbox", "read-only", "zed-config"]);
    let config: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        config["agent_servers"]["acp-bash"]["args"],
        serde_json::json!(["--timeout", "90s", "--sandbox", "read-only"])
    );
}

#[test]
fn run_prints_the_output_and_exits_with_the_command_status() {
    let output = acp_bash_full(&["run", "--", "echo hi; echo oops >&2; exit 3"]);
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    assert_eq!(stdout(&output), "hi\noops\n");
    let ok = acp_bash_full(&["run", "--", "printf", "'%s\\n'", "fine"]);
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(stdout(&ok), "fine\n");
}

#[test]
fn run_plain_prints_the_console_block_other_clients_see() {
    let output = acp_bash_full(&[
        "run",
        "--plain",
        "--",
        "printf '\\033[31mred\\033[0m\\n'; exit 2",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let text = stdout(&output);
    assert!(text.starts_with("```console\n"), "{text}");
    assert!(text.contains("red\n"), "{text}");
    assert!(
        !text.contains('\x1b'),
        "ANSI escapes are stripped: {text:?}"
    );
    assert!(text.contains("[exit code: 2]"), "{text}");
}

#[test]
fn run_transcript_goes_to_stderr() {
    let output = acp_bash_full(&["run", "--transcript", "--", "echo hi"]);
    assert!(output.status.success());
    assert_eq!(stdout(&output), "hi\n");
    let lines = stderr(&output);
    let protocol: Vec<&str> = lines
        .lines()
        .filter(|l| l.starts_with("-> ") || l.starts_with("<- "))
        .collect();
    assert!(
        protocol[0].starts_with("-> ") && protocol[0].contains("\"initialize\""),
        "{lines}"
    );
    for line in &protocol {
        serde_json::from_str::<Value>(&line[3..]).expect("each transcript line is JSON");
    }
    assert!(protocol.iter().any(|l| l.contains("terminal_output")));
}

#[test]
fn demo_shows_the_card_and_the_fallback() {
    let output = acp_bash(&["demo"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    for needle in [
        "ZED (terminal card",
        "ANY OTHER CLIENT",
        "```console",
        "line 5",
        "demo-dir",
        "failed",
        "completed",
        // The description syntax, as typed, and the description it makes.
        "you type: # Say hello",
        "  Say hello\n",
        // The env scrub at work on the child agent's fake token.
        "DEMO_API_TOKEN=(not here: removed by the env scrub)",
        // A background job, listed, then stopped.
        "agent: Started job 1",
        "running",
        "agent: Killed job 1",
        // A cancel.
        "(you press stop: session/cancel)",
        "[cancelled] [killed by signal: SIGTERM]",
        "(stop reason: Cancelled)",
    ] {
        assert!(text.contains(needle), "the demo shows {needle:?}:\n{text}");
    }
    assert!(!text.contains("demo-value-not-a-real-token"), "{text}");
    // The write outside the session folder in workspace mode: refused, or said not to be.
    let refused = text.contains("Read-only file system") || text.contains("Permission denied");
    assert!(
        refused || text.contains("workspace mode is not enforced here"),
        "{text}"
    );
}

#[test]
fn help_explains_every_flag() {
    let output = acp_bash(&["--help"]);
    assert!(output.status.success());
    let help = stdout(&output);
    for flag in [
        "--timeout",
        "--keep-env",
        "--set-env",
        "--no-env-scrub",
        "--sandbox",
        "--log-level",
    ] {
        assert!(help.contains(flag), "--help lists {flag}:\n{help}");
    }
    for command in ["serve", "demo", "run", "zed-config"] {
        assert!(help.contains(command), "--help lists {command}:\n{help}");
    }
    let run_help = stdout(&acp_bash(&["run", "--help"]));
    for flag in ["--plain", "--transcript", "SCRIPT"] {
        assert!(
            run_help.contains(flag),
            "run --help lists {flag}:\n{run_help}"
        );
    }
}

#[test]
fn bad_flags_are_refused_with_a_reason() {
    let output = acp_bash(&["--timeout", "soon", "serve"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("90s"), "{}", stderr(&output));
    let output = acp_bash(&["--sandbox", "jail", "serve"]);
    assert!(
        stderr(&output).contains("workspace, read-only, full or off"),
        "{}",
        stderr(&output)
    );
}

/// `run` with a flag it does not have (or a typo of one) before `--` refuses it by name, as
/// every other subcommand does, and runs nothing: bash never sees it as the script's start.
#[test]
fn run_refuses_an_unknown_flag_before_the_script() {
    for flag in ["--require-sandboxes", "--timout"] {
        let output = acp_bash_full(&["run", flag, "--", "echo ran-anyway"]);
        assert_eq!(output.status.code(), Some(2), "{flag}: {output:?}");
        let said = stderr(&output);
        assert!(
            said.contains(&format!("unexpected argument '{flag}'")),
            "{flag}: {said}"
        );
        assert!(!stdout(&output).contains("ran-anyway"), "{output:?}");
    }
}

fn acp_bash_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let (_tmp, dir) = temp_dir();
    let mut command = Command::new(binary());
    command
        .args(["--sandbox", "full"])
        .args(args)
        .current_dir(&dir);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run acp-bash")
}

#[test]
fn env_flags_reach_the_commands() {
    let secret = [("ACP_BASH_TEST_API_TOKEN", "abc123")];
    let script = "echo \"${ACP_BASH_TEST_API_TOKEN-scrubbed}\"";
    let scrubbed = acp_bash_env(&["run", "--", script], &secret);
    assert_eq!(stdout(&scrubbed), "scrubbed\n", "{}", stderr(&scrubbed));
    let kept = acp_bash_env(
        &["--keep-env", "ACP_BASH_TEST_API_TOKEN", "run", "--", script],
        &secret,
    );
    assert_eq!(stdout(&kept), "abc123\n");
    let unscrubbed = acp_bash_env(&["--no-env-scrub", "run", "--", script], &secret);
    assert_eq!(stdout(&unscrubbed), "abc123\n");
    let set = acp_bash_env(
        &[
            "--set-env",
            "GREETING=hi there",
            "run",
            "--",
            "echo \"$GREETING\"",
        ],
        &[],
    );
    assert_eq!(stdout(&set), "hi there\n");
}

#[test]
fn timeout_flag_kills_a_command_that_runs_too_long() {
    let started = std::time::Instant::now();
    let output = acp_bash_full(&[
        "--timeout",
        "300ms",
        "run",
        "--plain",
        "--",
        "echo before; sleep 30",
    ]);
    assert!(
        started.elapsed().as_secs() < 20,
        "took {:?}",
        started.elapsed()
    );
    assert_ne!(output.status.code(), Some(0));
    let text = stdout(&output);
    assert!(text.contains("before\n"), "{text}");
    assert!(text.contains("[timed out after"), "{text}");
}

/// Ctrl-C on `run` cancels the command through the protocol; `run` reports how it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_on_run_cancels_the_command() {
    use tokio::io::AsyncBufReadExt;
    let (_tmp, dir) = temp_dir();
    let name = process_name(&dir);
    let script = format!("echo started; exec -a {name} sleep 60");
    let mut run = tokio::process::Command::new(binary())
        .args(["--sandbox", "full", "run", "--", &script])
        .current_dir(&dir)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(run.stdout.take().unwrap()).lines();
    let first = guard("first line", stdout.next_line()).await.unwrap();
    assert_eq!(first.as_deref(), Some("started"));
    wait_for_process(&name).await;
    // SAFETY: kill has no memory-safety preconditions; the pid is our own child.
    unsafe { libc::kill(run.id().unwrap() as i32, libc::SIGINT) };
    let status = guard("run after Ctrl-C", run.wait()).await.unwrap();
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGTERM),
        "the command was killed: {status:?}"
    );
    assert!(wait_until_no_process(&name).await, "{name} still runs");
}

/// An agent started with an ssh login's variables (Zed's remote development starts it over
/// SSH) still runs its prelude in every command, and never the user's `~/.bashrc`: Debian's
/// bash takes a shell that sees `SSH_CLIENT` (at a shell level below 2) for sshd's, reads
/// `~/.bashrc` and skips `BASH_ENV`. The prelude unsets `BASH_ENV`, so a command that still
/// sees it ran without the prelude. Planted "SSH_CLIENT passed on": `BASH_ENV=/dev/fd/3`.
#[test]
fn an_agent_started_over_ssh_still_runs_its_prelude_and_no_bashrc() {
    let (_home_tmp, home) = temp_dir();
    std::fs::write(home.join(".bashrc"), "echo BASHRC-RAN\n").unwrap();
    let home = home.to_str().unwrap();
    for marker in ["SSH_CLIENT", "SSH2_CLIENT"] {
        let script = format!("cd /; echo \"env=${{BASH_ENV-unset}} {marker}=${{{marker}-unset}}\"");
        let output = acp_bash_env(
            &["run", "--", &script],
            &[
                (marker, "192.0.2.1 50000 22"),
                ("HOME", home),
                ("SHLVL", "0"),
            ],
        );
        let out = stdout(&output);
        assert!(out.contains("env=unset"), "{marker}: {out}");
        assert!(out.contains(&format!("{marker}=unset")), "{marker}: {out}");
        assert!(!out.contains("BASHRC-RAN"), "{marker}: {out}");
    }
}
