//! First contact: a bare `acp-bash` typed in a terminal says what it is and keeps serving; each
//! subcommand's `--help` lists only the flags it takes, with an example; `doctor` ends with a
//! verdict per mode and the names the env scrub would remove.

use std::io::Write as _;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};

use crate::support::acp::*;

/// A pseudo-terminal: (master, slave).
pub(super) fn openpty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two fds into the pointers we pass; the other arguments may be null
    // (`*mut` on Apple, `*const` on Linux: a null `*mut` is both).
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both fds were just opened and are owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// Typed on a terminal, `acp-bash` prints one line on stderr (what it is, what to try), and a
/// JSON-RPC request typed after it still gets its answer on stdout, which carries nothing else.
#[tokio::test]
async fn a_bare_acp_bash_on_a_terminal_says_what_it_is_and_keeps_serving() {
    let (_tmp, dir) = temp_dir();
    let (master, slave) = openpty();
    let mut agent = tokio::process::Command::new(binary())
        .current_dir(&dir)
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start acp-bash");
    let mut terminal = std::fs::File::from(master);
    writeln!(
        terminal,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":1}}}}"#
    )
    .unwrap();
    let mut stdout = BufReader::new(agent.stdout.take().unwrap()).lines();
    let answer = guard("the answer to initialize", stdout.next_line())
        .await
        .unwrap()
        .expect("an answer on stdout");
    let answer: Value = serde_json::from_str(&answer).expect("stdout carries JSON-RPC only");
    assert_eq!(answer["id"], 1, "{answer}");
    assert_eq!(
        answer["result"]["agentInfo"]["name"], "acp-bash",
        "{answer}"
    );
    // Ctrl-D at the start of a line: the end of input, and the agent ends.
    terminal.write_all(&[4]).unwrap();
    let status = guard("acp-bash after Ctrl-D", agent.wait()).await.unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(
        stdout.next_line().await.unwrap(),
        None,
        "nothing else on stdout"
    );
    let mut stderr = String::new();
    agent
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .await
        .unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {stderr:?}");
    for needle in ["ACP agent", "acp-bash demo", "acp-bash run -- ls"] {
        assert!(lines[0].contains(needle), "{needle:?} in {stderr:?}");
    }
}

/// Started by an editor (stdin a pipe), it says nothing.
#[test]
fn acp_bash_on_a_pipe_prints_nothing() {
    let (_tmp, dir) = temp_dir();
    let output = Command::new(binary())
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(output.stdout, b"");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("acp-bash demo"), "{stderr}");
}

fn help(subcommand: &str) -> String {
    let output = Command::new(binary())
        .args([subcommand, "--help"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{subcommand} --help");
    String::from_utf8(output.stdout).unwrap()
}

/// Whether `help` lists `flag` (`--plain`, not only `--plain-live`).
fn lists(help: &str, flag: &str) -> bool {
    help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n"))
}

/// `serve` and `run` take the engine flags, `demo` passes them on, `zed-config` also takes the
/// session flags, `doctor` only the environment flags; every one shows an example.
#[test]
fn each_subcommand_help_lists_only_the_flags_it_takes_with_an_example() {
    let engine = [
        "--timeout",
        "--sandbox",
        "--max-jobs",
        "--max-memory",
        "--plain-live",
    ];
    let env = ["--keep-env", "--set-env", "--no-env-scrub"];
    let store = ["--state-dir", "--no-history"];
    let run_only = ["--plain", "--transcript"];
    let cases: [(&str, Vec<&str>, Vec<&str>); 5] = [
        (
            "serve",
            [&engine[..], &env, &store].concat(),
            run_only.to_vec(),
        ),
        (
            "run",
            [&engine[..], &env, &run_only].concat(),
            store.to_vec(),
        ),
        (
            "demo",
            [&engine[..], &env].concat(),
            [&store[..], &run_only].concat(),
        ),
        (
            "zed-config",
            [&engine[..], &env, &store].concat(),
            run_only.to_vec(),
        ),
        (
            "doctor",
            env.to_vec(),
            [&engine[..], &store, &run_only].concat(),
        ),
    ];
    for (subcommand, takes, not) in cases {
        let text = help(subcommand);
        for flag in takes {
            assert!(
                lists(&text, flag),
                "{subcommand} --help lists {flag}:\n{text}"
            );
        }
        for flag in not {
            assert!(
                !lists(&text, flag),
                "{subcommand} --help must not list {flag}:\n{text}"
            );
        }
        assert!(
            text.contains("Example"),
            "{subcommand} --help has an example:\n{text}"
        );
        assert!(
            text.contains(&format!("acp-bash {subcommand}")),
            "{subcommand}'s example runs it:\n{text}"
        );
    }
    assert!(
        help("run").contains("Exit status"),
        "run --help says how it exits"
    );
}

fn doctor(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(binary());
    command.arg("doctor").args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

/// `doctor` ends with one line per mode a client can pick, then the names (never the values) of
/// the variables the scrub would remove, as `--keep-env` and `--no-env-scrub` change it.
#[test]
fn doctor_ends_with_a_verdict_per_mode_and_the_names_the_scrub_removes() {
    let secrets = [
        ("ACP_BASH_TEST_API_TOKEN", "plain-value-4711"),
        (
            "ACP_BASH_TEST_INNOCENT",
            "ghp_0123456789abcdefghijABCDEFGHIJ0123",
        ),
    ];
    let output = doctor(&[], &secrets);
    let text = String::from_utf8(output.stdout).unwrap();
    // The exit status is 0 exactly when the default mode (workspace) holds here.
    let workspace_holds = text.contains("\n  workspace  holds: ");
    assert_eq!(
        output.status.code(),
        Some(if workspace_holds { 0 } else { 1 }),
        "{text}"
    );
    let verdict = text
        .split_once("\nVerdict on this machine:\n")
        .unwrap_or_else(|| panic!("a verdict:\n{text}"))
        .1;
    let lines: Vec<&str> = verdict.lines().take(3).collect();
    for (line, mode) in lines.iter().zip(["workspace", "read-only", "full"]) {
        assert!(
            line.starts_with(&format!("  {mode:<10} ")),
            "{line:?}\n{text}"
        );
        assert!(
            line.contains("holds: ") || line.contains("weakened: ") || line.contains("missing: "),
            "{line:?}"
        );
    }
    let scrub = verdict
        .split_once("Environment scrub")
        .unwrap_or_else(|| panic!("the scrub's report:\n{text}"))
        .1;
    assert!(
        scrub.contains("ACP_BASH_TEST_API_TOKEN  its name holds `token`"),
        "{scrub}"
    );
    assert!(scrub.contains("ACP_BASH_TEST_INNOCENT"), "{scrub}");
    for (_, value) in secrets {
        assert!(!text.contains(value), "a value leaked:\n{text}");
    }
    let kept = doctor(&["--keep-env", "ACP_BASH_TEST_API_TOKEN"], &secrets);
    let kept = String::from_utf8(kept.stdout).unwrap();
    assert!(!kept.contains("ACP_BASH_TEST_API_TOKEN"), "{kept}");
    assert!(kept.contains("ACP_BASH_TEST_INNOCENT"), "{kept}");
    let off = doctor(&["--no-env-scrub"], &secrets);
    let off = String::from_utf8(off.stdout).unwrap();
    assert!(off.contains("off (--no-env-scrub)"), "{off}");
    assert!(!off.contains("ACP_BASH_TEST_INNOCENT"), "{off}");
}

/// A flag the subcommand does not take is refused, also when it stands before the subcommand.
#[test]
fn a_flag_that_does_not_apply_is_refused_with_where_to_look() {
    let output = Command::new(binary())
        .args(["--max-jobs", "3", "doctor"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("--max-jobs does not apply to `acp-bash doctor`")
            && stderr.contains("acp-bash doctor --help"),
        "{stderr}"
    );
}
