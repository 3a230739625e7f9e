//! `--sandbox off`: no kernel layer at all (the shell runs in the agent's PID namespace, writes
//! anywhere the agent can), while the environment scrub, the process-group kill at the end of a
//! run and the parent-death signal still hold. What it does not do is pinned too: a process the
//! command moves to a new session outlives the run.
#![cfg(target_os = "linux")]

use crate::support::engine::run;
use crate::support::sandbox::{marker, processes_with, wait_until_gone};
use acp_bash::exec::{Engine, EngineConfig, Exit};
use acp_bash::sandbox::Mode;

fn off_engine(vars: Vec<(&str, &str)>) -> Engine {
    Engine::with_environment(
        EngineConfig::default().sandbox_mode(Mode::Off),
        vars.into_iter()
            .map(|(name, value)| (name.into(), value.into())),
    )
}

const PATH: (&str, &str) = ("PATH", "/usr/local/bin:/usr/bin:/bin");

#[tokio::test]
async fn the_shell_runs_in_the_agents_pid_namespace_and_writes_anywhere() {
    let workspace = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir_in("/var/tmp").unwrap();
    let session = off_engine(vec![PATH]).session(workspace.path()).unwrap();
    let target = elsewhere.path().join("written");
    let outcome = run(
        &session,
        &format!("echo $$; echo x > {}; echo wrote", target.display()),
    )
    .await;
    assert_eq!(outcome.status.exit, Exit::Code(0), "{}", outcome.output);
    let pid: i32 = outcome.output.lines().next().unwrap().parse().unwrap();
    assert!(
        pid > 2,
        "not PID 2 of a namespace of its own: {}",
        outcome.output
    );
    assert!(target.exists(), "off confines no writes");
    assert!(
        outcome.notices.is_empty(),
        "off is the operator's choice, not a gap to announce: {:?}",
        outcome.notices
    );
}

#[tokio::test]
async fn the_environment_scrub_still_applies() {
    let dir = tempfile::tempdir().unwrap();
    let engine = off_engine(vec![
        PATH,
        ("GH_TOKEN", "ghp_0123456789abcdefghijABCDEFGHIJ0123"),
        ("MY_SETTING", "kept"),
    ]);
    let session = engine.session(dir.path()).unwrap();
    let outcome = run(&session, "echo ${GH_TOKEN-scrubbed} $MY_SETTING").await;
    assert_eq!(outcome.output, "scrubbed kept\n");
}

#[tokio::test]
async fn the_process_group_goes_with_the_run_but_a_new_session_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let session = off_engine(vec![PATH]).session(dir.path()).unwrap();
    let mark = marker("off");
    let (head, rest) = mark.split_at(4);
    let outcome = run(
        &session,
        &format!(
            r#"P={head}; P="${{P}}{rest}"
bash -c "exec -a $P-group sleep 1000" >/dev/null 2>&1 &
setsid bash -c "exec -a $P-session sleep 1000" >/dev/null 2>&1 &
until grep -qs "^$P-group" /proc/[0-9]*/cmdline && grep -qs "^$P-session" /proc/[0-9]*/cmdline; do sleep 0.01; done
echo started"#
        ),
    )
    .await;
    assert_eq!(outcome.output, "started\n");
    wait_until_gone(&format!("{mark}-group"));
    let survivors = processes_with(&format!("{mark}-session"));
    assert_eq!(
        survivors.len(),
        1,
        "documented: with the sandbox off, setsid escapes the run"
    );
    for pid in survivors {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    wait_until_gone(&mark);
}

// The shell no longer dies with the thread that started the run: every command is forked on the
// engine's one long-lived spawner thread, so a short-lived thread or runtime ending does not
// kill it. That it dies with the agent is `escapees::nothing_survives_a_real_agent_being_killed`.
