//! The sandbox through the real engine (`exec::Session::run`): each layer as a user meets it.
#![cfg(target_os = "linux")]

use std::net::TcpListener;
use std::time::Duration;

use crate::support::engine::{run, run_with};
use crate::support::sandbox::{marker, processes_with, start_escapees, wait_until_gone};
use acp_bash::exec::{Engine, EngineConfig, Exit};
use acp_bash::sandbox::{Mode, Support};
use tokio_util::sync::CancellationToken;

fn engine() -> Engine {
    Engine::new(
        EngineConfig::default()
            // Longer than any load can delay a shell's death from SIGTERM: a timeout or a
            // cancel must end the shell with TERM, exactly (the grace only runs out for a shell
            // that ignores TERM).
            .kill_grace(Duration::from_secs(30))
            .pipe_grace(Duration::from_millis(300)),
    )
}

/// A workspace outside the temp dir (which every mode may write).
fn workspace() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("acpbash-engine-")
        .tempdir_in("/var/tmp")
        .unwrap()
}

fn fully_supported() -> bool {
    use crate::support::skip_unless;
    let s = Support::current();
    skip_unless("Landlock filesystem rules", s.landlock.clone().map(|_| ()))
        && skip_unless("PID + mount namespaces", s.namespaces.clone())
        && skip_unless("private /proc", s.private_proc.clone())
        && skip_unless("network namespace", s.network_namespace.clone())
}

#[tokio::test]
async fn the_default_mode_confines_writes_to_the_workspace_and_says_nothing_when_all_is_enforced() {
    if !fully_supported() {
        return;
    }
    let ws = workspace();
    let outside = workspace();
    let session = engine().session(ws.path()).unwrap();
    assert_eq!(session.mode(), Mode::Workspace);
    let outcome = run(
        &session,
        &format!("echo in > f && echo x > {}/f", outside.path().display()),
    )
    .await;
    assert_eq!(outcome.status.exit, Exit::Code(1));
    assert!(
        outcome.output.contains("Read-only file system"),
        "{}",
        outcome.output
    );
    assert!(outcome.notices.is_empty(), "{:?}", outcome.notices);
    assert!(ws.path().join("f").exists());
    assert!(!outside.path().join("f").exists());
}

#[tokio::test]
async fn set_mode_changes_what_the_next_command_may_do_and_cd_still_carries_over() {
    if !fully_supported() {
        return;
    }
    let ws = workspace();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let session = engine().session(ws.path()).unwrap();
    session.set_mode(Mode::ReadOnly);
    let outcome = run(&session, "cd sub && echo x > f").await;
    assert_eq!(outcome.status.exit, Exit::Code(1));
    assert!(
        outcome.output.contains("Read-only file system"),
        "{}",
        outcome.output
    );
    // The cwd record lives in the temp dir, which stays writable.
    assert_eq!(session.cwd(), ws.path().join("sub").canonicalize().unwrap());
    session.set_mode(Mode::Workspace);
    let outcome = run(&session, "echo y > f && cat f").await;
    assert_eq!(
        (outcome.status.exit, outcome.output.as_str()),
        (Exit::Code(0), "y\n")
    );
    assert!(ws.path().join("sub/f").exists());
}

#[tokio::test]
async fn read_only_mode_has_no_network() {
    if !fully_supported() {
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let ws = workspace();
    let session = engine().session(ws.path()).unwrap();
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let outcome = run(&session, &script).await;
    assert_eq!(outcome.output, "connected\n");
    session.set_mode(Mode::ReadOnly);
    let outcome = run(&session, &script).await;
    assert_eq!(outcome.status.exit, Exit::Code(1));
    assert!(!outcome.output.contains("connected"), "{}", outcome.output);
}

fn escapees(mark: &str) -> String {
    format!("{}echo ready", start_escapees(mark))
}

#[tokio::test]
async fn nothing_a_command_starts_survives_its_run_in_any_mode() {
    if !fully_supported() {
        return;
    }
    let ws = workspace();
    let session = engine().session(ws.path()).unwrap();
    for mode in Mode::ALL {
        session.set_mode(mode);
        let mark = marker("engine-end");
        let outcome = run(&session, &escapees(&mark)).await;
        assert_eq!(outcome.output, "ready\n", "{mode}");
        wait_until_gone(&mark);
    }
}

#[tokio::test]
async fn nothing_survives_a_timeout_or_a_cancel() {
    if !fully_supported() {
        return;
    }
    let ws = workspace();
    let session = std::sync::Arc::new(engine().session(ws.path()).unwrap());

    let mark = marker("engine-timeout");
    let script = format!("{}\nsleep 1000", escapees(&mark));
    let outcome = run_with(
        &session,
        &script,
        Some(Duration::from_secs(3)),
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(outcome.status.timed_out_after, Some(Duration::from_secs(3)));
    assert_eq!(outcome.status.exit, Exit::Signal(libc::SIGTERM));
    wait_until_gone(&mark);

    let mark = marker("engine-cancel");
    let script = format!("{}\nsleep 1000", escapees(&mark));
    let cancel = CancellationToken::new();
    let task = {
        let (session, cancel) = (session.clone(), cancel.clone());
        tokio::spawn(async move { run_with(&session, &script, None, &cancel).await })
    };
    // Cancel once the escapees are up (seen from outside, by their marker).
    // A poll on the condition; the deadline is only a hang guard.
    let start = std::time::Instant::now();
    while processes_with(&mark).len() < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "escapees never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cancel.cancel();
    let outcome = task.await.unwrap();
    assert!(outcome.status.cancelled);
    assert_eq!(outcome.status.exit, Exit::Signal(libc::SIGTERM));
    wait_until_gone(&mark);
}

#[tokio::test]
async fn no_other_environment_is_readable() {
    if !fully_supported() {
        return;
    }
    // A process outside the sandbox with a secret in its environment.
    let mut victim = std::process::Command::new("sleep")
        .arg("1000")
        .env("ACPBASH_ENGINE_SECRET", "hunter2-acpbash")
        .spawn()
        .unwrap();
    let ws = workspace();
    let session = engine().session(ws.path()).unwrap();
    for mode in Mode::ALL {
        session.set_mode(mode);
        let script = format!(
            "cat /proc/{victim}/environ 2>/dev/null | wc -c; \
             cat /proc/1/environ 2>/dev/null | tr -d '\\0' | wc -c; \
             for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null | grep -c hunter2-acpbash",
            victim = victim.id()
        );
        let outcome = run(&session, &script).await;
        // Not visible at all; PID 1 (a fork of the agent) shows an empty environment, or none
        // (a root command in a user namespace may not read it at all).
        assert_eq!(outcome.output, "0\n0\n0\n", "{mode}");
    }
    victim.kill().unwrap();
    victim.wait().unwrap();
}
