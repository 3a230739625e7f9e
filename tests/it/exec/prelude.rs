//! The prelude that carries `cd` over is invisible to scripts: their own EXIT traps run (and see
//! the exit status), `trap` behaves like the builtin, line numbers and exit codes are the
//! script's, and nothing of it reaches child processes. Real bash, default sandbox mode.

use std::path::Path;

use crate::support::engine::run;
use acp_bash::exec::{Engine, EngineConfig, Exit, Session};

fn session(root: &Path) -> Session {
    Engine::new(EngineConfig::default()).session(root).unwrap()
}

/// A session rooted in a fresh directory with a subdirectory `sub`.
fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    (tmp, root)
}

#[tokio::test]
async fn a_script_that_exits_keeps_its_code_and_its_cd() {
    let (_tmp, root) = workspace();
    let s = session(&root);
    let outcome = run(&s, "cd sub; exit 3").await;
    assert_eq!(outcome.status.exit, Exit::Code(3));
    assert_eq!(outcome.next_cwd, root.join("sub"));
}

#[tokio::test]
async fn without_a_cd_the_directory_stays() {
    let (_tmp, root) = workspace();
    let s = session(&root);
    let outcome = run(&s, "cd sub; cd ..; echo back").await;
    assert_eq!(outcome.output, "back\n");
    assert_eq!(outcome.next_cwd, root);
    assert_eq!(s.cwd(), root);
}

#[tokio::test]
async fn a_cd_through_a_symlink_is_recorded_as_the_real_directory() {
    let (_tmp, root) = workspace();
    std::os::unix::fs::symlink(root.join("sub"), root.join("link")).unwrap();
    let s = session(&root);
    let outcome = run(&s, "cd link && echo $PWD").await;
    assert_eq!(outcome.output, format!("{}\n", root.join("link").display()));
    assert_eq!(outcome.next_cwd, root.join("sub"));
}

#[tokio::test]
async fn the_scripts_exit_trap_runs_with_the_exit_status_and_may_change_it() {
    let (_tmp, root) = workspace();
    let s = session(&root);
    let seen = run(&s, "trap 'echo user-exit $?' EXIT; cd sub; false").await;
    assert_eq!(seen.output, "user-exit 1\n");
    assert_eq!(seen.status.exit, Exit::Code(1));
    assert_eq!(seen.next_cwd, root.join("sub"));

    let changed = run(&s, "trap 'exit 5' EXIT; cd ..; true").await;
    assert_eq!(changed.status.exit, Exit::Code(5));
    assert_eq!(
        changed.next_cwd, root,
        "recorded before the user's trap ran"
    );
}

#[tokio::test]
async fn every_way_of_setting_and_clearing_an_exit_trap_is_honoured() {
    let (_tmp, root) = workspace();
    let s = session(&root);
    for (script, expected) in [
        ("trap -- 'echo dashdash' EXIT", "dashdash\n"),
        ("trap 'echo zero' 0", "zero\n"),
        ("trap 'echo sig' SIGEXIT", "sig\n"),
        ("trap 'echo lower' exit", "lower\n"),
        ("trap 'echo gone' EXIT; trap - EXIT", ""),
        ("trap 'echo gone' EXIT; trap EXIT", ""),
        ("trap 'echo gone' EXIT; trap '' EXIT", ""),
        (
            "trap 'echo both' EXIT INT; trap -p INT",
            "trap -- 'echo both' SIGINT\nboth\n",
        ),
        ("set -u; trap 'echo strict' EXIT; cd sub", "strict\n"),
    ] {
        let outcome = run(&s, script).await;
        assert_eq!(outcome.output, expected, "{script}");
        assert_eq!(outcome.status.exit, Exit::Code(0), "{script}");
    }
    assert_eq!(s.cwd(), root.join("sub"), "the `set -u` script's cd");
}

#[tokio::test]
async fn other_traps_are_the_builtins() {
    let (_tmp, root) = workspace();
    let s = session(&root);
    let outcome = run(
        &s,
        "trap 'echo caught' USR1; kill -USR1 $$; trap -p USR1; trap",
    )
    .await;
    assert_eq!(
        outcome.output, "caught\ntrap -- 'echo caught' SIGUSR1\ntrap -- 'echo caught' SIGUSR1\n",
        "no EXIT trap listed: the prelude's is not the script's"
    );
    let listed = run(&s, r#"trap "echo \"it's mine\"" EXIT; trap; trap -p EXIT"#).await;
    assert_eq!(
        listed.output,
        "trap -- 'echo \"it'\\''s mine\"' EXIT\n".repeat(2) + "it's mine\n",
        "the script's own EXIT trap, quoted by bash, is what a listing shows"
    );
    let bad = run(&s, "trap 'echo x' NOSUCHSIGNAL").await;
    assert_eq!(bad.status.exit, Exit::Code(1), "{}", bad.output);
    assert!(bad.output.contains("invalid signal specification"));
}

#[tokio::test]
async fn line_numbers_are_the_scripts_and_children_see_none_of_it() {
    let (_tmp, root) = workspace();
    let s = session(&root);
    let outcome = run(
        &s,
        "echo line $LINENO\n\
         echo ${BASH_ENV-unset} ${ACP_BASH_CWD_FILE-unset}\n\
         bash -c 'type -t trap; echo ${__acp_bash_start_dir-unset}'",
    )
    .await;
    assert_eq!(outcome.output, "line 1\nunset unset\nbuiltin\nunset\n");
}
