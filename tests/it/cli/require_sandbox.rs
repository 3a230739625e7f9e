//! `--require-sandbox` and `doctor`'s verdict on a machine where the sandbox is not whole. That
//! machine is made for real, not mocked: a user namespace of the test's own whose
//! `user.max_user_namespaces` is 0 (`unshare -Ur`), in which acp-bash can create no user
//! namespace, so the view, the masks and everything that needs them are missing while
//! Landlock and seccomp still work: workspace mode is weakened there.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::acp::binary;
use crate::support::skip::skip_unless;

/// Runs `acp-bash ARGS` in `dir`, in a user namespace where no further one can be made;
/// `None` (a recorded skip) where this machine cannot make that namespace.
fn without_user_namespaces(dir: &Path, args: &[&str]) -> Option<Output> {
    without_user_namespaces_with(dir, None, args)
}

/// [`without_user_namespaces`] with `HOME` set to `home`.
fn without_user_namespaces_in(dir: &Path, home: &Path, args: &[&str]) -> Option<Output> {
    without_user_namespaces_with(dir, Some(home), args)
}

fn without_user_namespaces_with(dir: &Path, home: Option<&Path>, args: &[&str]) -> Option<Output> {
    const LIMIT: &str = "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"";
    let probe = Command::new("unshare")
        .args(["-Ur", "sh", "-c", LIMIT, "sh", "true"])
        .output();
    let works = match &probe {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "unshare -Ur failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => Err(format!("no unshare(1): {e}")),
    };
    if !skip_unless("user namespace", works) {
        return None;
    }
    let mut command = Command::new("unshare");
    command
        .args(["-Ur", "sh", "-c", LIMIT, "sh"])
        .arg(binary())
        .args(args)
        .current_dir(dir);
    if let Some(home) = home {
        command.env("HOME", home);
    }
    let output = command.output().expect("run acp-bash in a user namespace");
    Some(output)
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Under `--require-sandbox`, a workspace command is refused where its sandbox is weakened,
/// with what is missing and what to do; it leaves no trace. Without the flag the same command
/// runs, and says what is not enforced.
#[test]
fn a_weakened_mode_refuses_commands_under_require_sandbox_and_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let script = "echo ran > marker; echo ran-it";
    let Some(refused) =
        without_user_namespaces(dir.path(), &["run", "--require-sandbox", "--", script])
    else {
        return;
    };
    let said = text(&refused);
    assert_eq!(refused.status.code(), Some(126), "{said}");
    assert!(
        said.contains("acp-bash refuses to run this command (--require-sandbox): Workspace mode's sandbox is weakened on this machine. Missing: "),
        "{said}"
    );
    assert!(said.contains("no filesystem view"), "{said}");
    assert!(said.contains("acp-bash doctor"), "{said}");
    assert!(!said.contains("ran-it"), "{said}");
    assert!(!dir.path().join("marker").exists(), "the command ran");

    let ran = without_user_namespaces(dir.path(), &["run", "--", script]).unwrap();
    let said = text(&ran);
    assert_eq!(ran.status.code(), Some(0), "{said}");
    assert!(said.contains("ran-it"), "{said}");
    assert!(said.contains("NOT enforced on this machine"), "{said}");
    assert!(dir.path().join("marker").exists());
}

/// There, `acp-bash run` prints the mode's notice (what is NOT enforced) on stderr, and on
/// stdout only the command's bytes, as a CLI should; a client's card (Zed, through `serve`)
/// still shows the notice among the output, as before. Planted "`run` does not ask for notices
/// apart" (the notice then leads stdout): caught.
#[test]
fn run_prints_the_modes_notice_on_stderr_and_only_the_commands_bytes_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ran) = without_user_namespaces(dir.path(), &["run", "--", "printf 'ran-it\\n'"])
    else {
        return;
    };
    let (stdout, stderr) = (
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr),
    );
    assert_eq!(ran.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout, "ran-it\n", "stderr: {stderr}");
    assert!(
        stderr.contains("[acp-bash: Workspace mode: NOT enforced on this machine: "),
        "{stderr}"
    );
}

/// The same run through `serve` there, as a client sees it: Zed's card shows the mode's notices
/// among the output exactly as before (no update of their own); a client that asks for notices
/// apart (`_meta.acp_bash_notices`, what `run` asks) gets the command's bytes alone on the card
/// and each notice as an update of its own, in the same order. Planted "notices always inline"
/// (the reader's notice dropped to a line): caught by the second half.
#[test]
fn the_card_shows_notices_inline_unless_the_client_asks_for_them_apart() {
    use crate::support::acp::{card_output, converse_with, tool_call_updates};
    use acp_bash::acp::client::{AcpClient, ClientProfile};
    const LIMIT: &str = "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"";
    let dir = tempfile::tempdir().unwrap();
    if without_user_namespaces(dir.path(), &["--version"]).is_none() {
        return;
    }
    let card = |apart: bool| {
        let binary = binary();
        let mut client = AcpClient::new(
            "unshare",
            [
                "-Ur",
                "sh",
                "-c",
                LIMIT,
                "sh",
                binary.to_str().unwrap(),
                "serve",
                "--sandbox",
                "workspace",
                "--no-history",
            ],
        )
        .profile(ClientProfile::Zed);
        if apart {
            client = client.notices_apart();
        }
        let cwd = dir.path().to_path_buf();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let (updates, _) = runtime.block_on(converse_with(
            client,
            "a weakened run",
            async move |mut c| {
                let session = c.new_session(&cwd).await?;
                Ok(c.prompt(&session, "printf 'ran-it\\n'").await?.updates)
            },
        ));
        let notices: Vec<String> = tool_call_updates(&updates)
            .iter()
            .filter_map(|u| {
                u.meta
                    .as_ref()?
                    .get("acp_bash_notice")?
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        (card_output(&updates), notices)
    };
    let (inline, none) = card(false);
    assert!(
        inline.starts_with("[acp-bash: Workspace mode: NOT enforced on this machine: ")
            && inline.ends_with("]\nran-it\n"),
        "{inline}"
    );
    assert_eq!(none, Vec::<String>::new());
    let (alone, notices) = card(true);
    assert_eq!(alone, "ran-it\n");
    let lines: String = notices
        .iter()
        .map(|n| format!("[acp-bash: {n}]\n"))
        .collect();
    assert_eq!(
        format!("{lines}ran-it\n"),
        inline,
        "the same notices, in the same order"
    );
}

/// `doctor` there: workspace is weakened (not missing: Landlock still confines writes), full
/// holds, and the exit status is 1.
#[test]
fn doctor_exits_1_where_the_default_mode_is_weakened() {
    let dir = tempfile::tempdir().unwrap();
    let Some(output) = without_user_namespaces(dir.path(), &["doctor"]) else {
        return;
    };
    let said = text(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    let verdict = said
        .split_once("\nVerdict on this machine:\n")
        .unwrap_or_else(|| panic!("a verdict:\n{said}"))
        .1;
    let landlock = said.contains("  [works]   Landlock filesystem rules");
    let workspace = if landlock { "weakened: " } else { "missing: " };
    assert!(
        verdict.contains(&format!("\n  workspace  {workspace}"))
            || verdict.starts_with(&format!("  workspace  {workspace}")),
        "{verdict}"
    );
    assert!(verdict.contains("no filesystem view"), "{verdict}");
    assert!(said.contains("The default mode (workspace) is "), "{said}");
    assert!(said.contains("user.max_user_namespaces=0"), "{said}");
}

/// Where the default mode holds (as doctor's exit status says), `--require-sandbox` changes
/// nothing: the command runs.
#[test]
fn require_sandbox_runs_commands_where_the_mode_holds() {
    let dir = tempfile::tempdir().unwrap();
    let doctor = Command::new(binary()).arg("doctor").output().unwrap();
    let holds = doctor.status.code() == Some(0);
    let output = Command::new(binary())
        .args(["run", "--require-sandbox", "--", "echo fine"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let said = text(&output);
    if holds {
        assert_eq!(output.status.code(), Some(0), "{said}");
        assert!(said.contains("fine") && !said.contains("refuses"), "{said}");
    } else {
        assert_eq!(output.status.code(), Some(126), "{said}");
        assert!(said.contains("refuses to run this command"), "{said}");
    }
}

/// Hostile: without a user namespace (no view, no masks), a workspace command still cannot
/// read credential files: Landlock read rules grant everything but the masked paths. The rest
/// of the home, the system and the session folder stay readable, and a file the command makes
/// is readable to it.
#[test]
fn without_the_view_credential_files_stay_unreadable_through_landlock() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    for folder in [home.join(".ssh"), home.join(".aws"), work.clone()] {
        std::fs::create_dir_all(&folder).unwrap();
    }
    std::fs::write(home.join(".ssh/id_ed25519"), "SSH-SECRET-4711\n").unwrap();
    std::fs::write(home.join(".aws/credentials"), "AWS-SECRET-4711\n").unwrap();
    std::fs::write(home.join(".ssh/known_hosts"), "known-host-line\n").unwrap();
    std::fs::write(home.join("notes.txt"), "plain-notes\n").unwrap();
    // A link from the session folder to a credential file reads nothing either.
    std::os::unix::fs::symlink(home.join(".aws"), work.join("aws-link")).unwrap();
    let script = "cat ~/.ssh/id_ed25519; cat ~/.aws/credentials; cat aws-link/credentials; \
                  cat ~/.ssh/known_hosts ~/notes.txt; head -c 4 /etc/passwd; echo; \
                  echo made > mine && cat mine";
    let doctor_landlock = Command::new(binary()).arg("doctor").output().unwrap();
    let landlock = String::from_utf8_lossy(&doctor_landlock.stdout)
        .contains("  [works]   Landlock filesystem rules");
    if !skip_unless(
        "Landlock filesystem rules",
        if landlock {
            Ok(())
        } else {
            Err("no Landlock here")
        },
    ) {
        return;
    }
    let Some(output) = without_user_namespaces_in(&work, &home, &["run", "--plain", "--", script])
    else {
        return;
    };
    let said = text(&output);
    assert!(
        said.contains("no filesystem view"),
        "the view is missing there: {said}"
    );
    for secret in ["SSH-SECRET-4711", "AWS-SECRET-4711"] {
        assert!(!said.contains(secret), "{secret} was read:\n{said}");
    }
    // (The live view may show the output twice: each refusal is looked for, not counted.)
    for refused in [
        "home/.ssh/id_ed25519: Permission denied",
        "home/.aws/credentials: Permission denied",
        "aws-link/credentials: Permission denied",
    ] {
        assert!(said.contains(refused), "{refused}:\n{said}");
    }
    for readable in ["known-host-line", "plain-notes", "root", "made"] {
        assert!(said.contains(readable), "{readable} unreadable:\n{said}");
    }
}
