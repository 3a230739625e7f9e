//! Interactive programs fail fast: commands have no terminal, so `EDITOR`, `VISUAL`,
//! `GIT_EDITOR` and `GIT_SEQUENCE_EDITOR` point at a stub (a shell snippet, no file) that says
//! why and fails. `git commit` without `-m` and `git rebase -i` end with that message in every
//! sandbox mode, as root and as an ordinary user; an inherited `EDITOR=vim` is replaced, an
//! explicit `--set-env` wins. The tests wait for each run's end (with the hang guard), they time
//! nothing.

use std::process::Command;

use acp_bash::exec::{Engine, EngineConfig};
use acp_bash::sandbox::Mode;

use crate::support::engine::run;

/// What the stub prints.
const MESSAGE: &str = "acp-bash: no terminal here, so no editor can run; pass the text on the \
                       command line instead (git commit -m MESSAGE";

/// A repository in a fresh temp dir (writable in every mode, read-only's private one too) with
/// two commits and a staged change (removed at the end: in `full` and `off` that temp dir is the
/// host's); then `git commit` without `-m`, `git rebase -i`, and a bash
/// script's unquoted `$EDITOR file`.
const SCRIPT: &str = r#"set -e
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT && cd "$t"
git init -q repo && cd repo
git config user.email test@example.com && git config user.name test
echo a > f && git add f && git commit -qm one
echo b >> f && git commit -qam two
echo c > g && git add g
set +e
git commit; echo "commit exit $?"
git reset -q --hard
git rebase -i HEAD~1; echo "rebase exit $?"
$EDITOR notes.txt; echo "unquoted exit $?"
"#;

fn assert_fails_fast(mode: Mode, output: &str) {
    assert_eq!(
        output.lines().filter(|l| l.starts_with(MESSAGE)).count(),
        2,
        "{mode}: git commit and git rebase -i print the stub's message:\n{output}"
    );
    for line in ["commit exit 1", "rebase exit 1", "unquoted exit 2"] {
        assert!(output.contains(line), "{mode}: {line:?} in\n{output}");
    }
}

#[test]
fn git_commit_and_rebase_i_end_with_the_no_editor_message_in_every_mode() {
    crate::support::sandbox::as_root_and_nobody(
        "exec::editors::git_commit_and_rebase_i_end_with_the_no_editor_message_in_every_mode",
        || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let dir = tempfile::tempdir().unwrap();
                for mode in [Mode::Workspace, Mode::ReadOnly, Mode::Full, Mode::Off] {
                    // The agent inherited the user's editor: it is replaced all the same.
                    let inherited = ["EDITOR", "VISUAL", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR"]
                        .map(|name| (name.into(), "vim".into()));
                    let engine = Engine::with_environment(
                        EngineConfig::default().sandbox_mode(mode),
                        std::env::vars_os().chain(inherited),
                    );
                    let session = engine.session(dir.path()).unwrap();
                    let outcome = run(&session, SCRIPT).await;
                    assert_fails_fast(mode, &outcome.output);
                    assert!(outcome.status.timed_out_after.is_none(), "{mode}");
                }
            });
        },
    );
}

fn repo_script(then: &str) -> String {
    format!(
        "set -e; t=$(mktemp -d); trap 'rm -rf \"$t\"' EXIT; cd \"$t\"; git init -q repo; cd repo; \
         git config user.email test@example.com; git config user.name test; \
         echo a > f; git add f; {then}"
    )
}

/// Through the binary as a client starts it: the user's own `EDITOR=vim` (inherited from the
/// editor that started the agent) is replaced, since vim cannot work without a terminal...
#[test]
fn an_inherited_editor_is_replaced_but_an_explicit_set_env_wins() {
    let (_tmp, dir) = crate::support::acp::temp_dir();
    let output = Command::new(crate::support::acp::binary())
        // The hang guard: without the stub, vim waits for a terminal until this timeout.
        .args(["run", "--timeout", "60s", "--", &repo_script("git commit")])
        .env("EDITOR", "vim")
        .env("VISUAL", "vim")
        .env("GIT_EDITOR", "vim")
        .current_dir(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains(MESSAGE), "{text}");
    assert_eq!(output.status.code(), Some(1), "{text}");
    // ... while the person starting the agent may choose one with --set-env (here a "editor"
    // that writes the message), and it wins over the stub.
    let output = Command::new(crate::support::acp::binary())
        .args([
            "--set-env",
            "GIT_EDITOR=echo written-by-my-editor >",
            "run",
            "--timeout",
            "60s",
            "--",
            &repo_script("git commit; git log -1 --format=%s"),
        ])
        .env("EDITOR", "vim")
        .current_dir(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.ends_with("written-by-my-editor\n"), "{text}");
}
