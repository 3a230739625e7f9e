//! No escapees: whatever a command starts (setsid, double fork, nohup) is gone when the run
//! ends normally, is timed out or cancelled (the engine signals the process group), or when
//! the agent dies (the process the engine spawned is SIGKILLed alone).
#![cfg(target_os = "linux")]

mod sandbox_util;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

use acp_bash::sandbox::{Mode, Support};
use sandbox_util::{marker, processes_with, spawn, wait_for_file, HANG_GUARD};

fn namespaces() -> bool {
    let ok = Support::current().namespaces.is_ok();
    if !ok {
        eprintln!("skipping: no PID namespace here");
    }
    ok
}

/// Starts three escapees tagged with `mark`, waits until they run, writes `ready`, then runs
/// `tail`. The marker is assembled at run time so the script's own command line doesn't hold it.
fn script(mark: &str, dir: &Path, tail: &str) -> String {
    let (head, rest) = mark.split_at(4);
    format!(
        r#"P={head}; P="${{P}}{rest}"
setsid bash -c "exec -a $P-setsid sleep 1000" &
( ( exec -a "$P-double" sleep 1000 ) & )
nohup bash -c "exec -a $P-nohup sleep 1000" >/dev/null 2>&1 &
until [ "$(grep -l "$P-[sdn][eoo]" /proc/[0-9]*/cmdline 2>/dev/null | wc -l)" -ge 3 ]; do sleep 0.01; done
echo ready > {ready}
{tail}"#,
        ready = dir.join("ready").display()
    )
}

fn wait_until_gone(mark: &str) {
    let start = Instant::now();
    while !processes_with(mark).is_empty() {
        assert!(start.elapsed() < HANG_GUARD, "escapees survive: {:?}", processes_with(mark));
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn check(mode: Mode, tail: &str, act: impl FnOnce(&sandbox_util::Running, &Path)) -> std::process::ExitStatus {
    let dir = tempfile::tempdir().unwrap();
    let mark = marker("esc");
    let running = spawn(&script(&mark, dir.path(), tail), mode, dir.path());
    wait_for_file(&dir.path().join("ready"));
    assert_eq!(processes_with(&mark).len(), 3, "the escapees should be running");
    act(&running, dir.path());
    let (status, _output) = running.finish();
    // The kernel tears the namespace down before PID 1's parent can reap it: nothing is left
    // by the time the run is over.
    assert_eq!(processes_with(&mark), Vec::<i32>::new(), "escapees survive the run");
    status
}

#[test]
fn nothing_survives_a_normal_end() {
    if !namespaces() {
        return;
    }
    for mode in Mode::ALL {
        let status = check(mode, "until [ -e go ]; do sleep 0.01; done; exit 7", |_, dir| {
            std::fs::write(dir.join("go"), "").unwrap();
        });
        assert_eq!(status.code(), Some(7), "{mode}: the shell's exit code comes through");
    }
}

#[test]
fn nothing_survives_a_timeout_or_cancel() {
    if !namespaces() {
        return;
    }
    // The engine's kill: SIGTERM to the process group; the shell dies of it.
    let status = check(Mode::Workspace, "sleep 1000", |running, _| running.signal_group(libc::SIGTERM));
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
}

#[test]
fn nothing_survives_a_shell_that_ignores_sigterm() {
    if !namespaces() {
        return;
    }
    // A shell that traps TERM outlives the grace; the engine's SIGKILL to the group ends it.
    let status = check(Mode::Workspace, "trap '' TERM; while :; do sleep 0.05; done", |running, _| {
        running.signal_group(libc::SIGTERM);
        running.signal_group(libc::SIGKILL);
    });
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
}

#[test]
fn nothing_survives_the_agent_dying() {
    if !namespaces() {
        return;
    }
    // The agent's death SIGKILLs the process it spawned (the engine's parent-death signal);
    // here we SIGKILL that process alone: the namespace's init follows it, and everything with it.
    let dir = tempfile::tempdir().unwrap();
    let mark = marker("agent");
    let running = spawn(&script(&mark, dir.path(), "sleep 1000"), Mode::Full, dir.path());
    wait_for_file(&dir.path().join("ready"));
    assert_eq!(processes_with(&mark).len(), 3);
    unsafe { libc::kill(running.pid(), libc::SIGKILL) };
    wait_until_gone(&mark);
    let (status, _) = running.finish();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}

#[test]
fn signals_sent_to_the_spawned_process_alone_reach_the_shell() {
    if !namespaces() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let script = format!("trap 'echo got-usr1; exit 3' USR1; echo ready > {}; while :; do sleep 0.02; done", ready.display());
    let running = spawn(&script, Mode::Workspace, dir.path());
    wait_for_file(&ready);
    // From a process other than its parent, as `kill <pid>` from a terminal would.
    let pid = running.pid();
    let status = std::process::Command::new("kill").args(["-USR1", &pid.to_string()]).status().unwrap();
    assert!(status.success());
    let (status, output) = running.finish();
    assert_eq!(status.code(), Some(3), "{output}");
    // The foreground `sleep` gets it too (same group), as without a sandbox.
    assert!(output.ends_with("got-usr1\n"), "{output}");
}

#[test]
fn zombies_are_reaped_and_exit_statuses_come_through() {
    let dir = tempfile::tempdir().unwrap();
    // Double-forked children that exit are reaped by PID 1 (no zombie pile-up), and the
    // shell's own status is reported as if there were no sandbox.
    let script = "for i in $(seq 20); do ( ( true ) & ) ; done; sleep 0.2; \
                  ls /proc | grep -c '^[0-9]' >/dev/null; \
                  z=$(grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l); echo zombies=$z; kill -TERM $$";
    let (status, output) = spawn(script, Mode::Workspace, dir.path()).finish();
    assert_eq!(output, "zombies=0\n");
    assert_eq!(status.signal(), Some(libc::SIGTERM));
}

