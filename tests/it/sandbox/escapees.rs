//! No escapees: whatever a command starts (setsid, double fork, nohup) is gone when the run
//! ends normally, is timed out or cancelled (the engine signals the process group), or when
//! the agent dies (the process the engine spawned is SIGKILLed alone).
#![cfg(target_os = "linux")]

use crate::support::sandbox::as_root_and_nobody;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::sandbox::{
    marker, processes_with, spawn, spawn_with, start_escapees, wait_for_file, wait_until_delivered,
    wait_until_gone,
};
use acp_bash::sandbox::{Mode, Support};

fn namespaces() -> bool {
    let namespaces = Support::current().namespaces.clone();
    crate::support::skip_unless("PID + mount namespaces", namespaces)
}

/// Starts three escapees tagged with `mark`, waits until they run, writes `ready`, then runs
/// `tail`. The marker is assembled at run time so the script's own command line doesn't hold it.
fn script(mark: &str, dir: &Path, tail: &str) -> String {
    format!(
        "{}echo ready > {ready}\n{tail}",
        start_escapees(mark),
        ready = dir.join("ready").display()
    )
}

fn check(
    mode: Mode,
    tail: &str,
    act: impl FnOnce(&crate::support::sandbox::Running, &Path),
) -> std::process::ExitStatus {
    check_with(Support::current(), mode, tail, act)
}

fn check_with(
    support: &Support,
    mode: Mode,
    tail: &str,
    act: impl FnOnce(&crate::support::sandbox::Running, &Path),
) -> std::process::ExitStatus {
    let dir = tempfile::tempdir().unwrap();
    let mark = marker("esc");
    let running = spawn_with(&script(&mark, dir.path(), tail), mode, dir.path(), support);
    wait_for_file(&dir.path().join("ready"));
    assert_eq!(
        processes_with(&mark).len(),
        3,
        "the escapees should be running"
    );
    act(&running, dir.path());
    let (status, _output) = running.finish();
    // The engine's final SIGKILL of the group reaches PID 1; the kernel takes the rest.
    wait_until_gone(&mark);
    status
}

#[test]
fn nothing_survives_a_normal_end() {
    as_root_and_nobody("sandbox::escapees::nothing_survives_a_normal_end", || {
        if !namespaces() {
            return;
        }
        // Read-only commands can't write the `ready` file the test waits for; their PID namespace
        // is the same code as the other modes'.
        for mode in [Mode::Workspace, Mode::Full] {
            let status = check(
                mode,
                "until [ -e go ]; do sleep 0.01; done; exit 7",
                |_, dir| {
                    std::fs::write(dir.join("go"), "").unwrap();
                },
            );
            assert_eq!(
                status.code(),
                Some(7),
                "{mode}: the shell's exit code comes through"
            );
        }
    });
}

#[test]
fn nothing_survives_a_timeout_or_cancel() {
    as_root_and_nobody(
        "sandbox::escapees::nothing_survives_a_timeout_or_cancel",
        || {
            if !namespaces() {
                return;
            }
            // The engine's kill: SIGTERM to the process group; the shell dies of it.
            let status = check(Mode::Workspace, "sleep 1000", |running, _| {
                running.signal_group(libc::SIGTERM)
            });
            assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
        },
    );
}

#[test]
fn nothing_survives_a_shell_that_ignores_sigterm() {
    as_root_and_nobody(
        "sandbox::escapees::nothing_survives_a_shell_that_ignores_sigterm",
        || {
            if !namespaces() {
                return;
            }
            // A shell that traps TERM outlives the grace; the engine's SIGKILL to the group ends it.
            let status = check(
                Mode::Workspace,
                "trap '' TERM; while :; do sleep 0.05; done",
                |running, _| {
                    running.signal_group(libc::SIGTERM);
                    running.signal_group(libc::SIGKILL);
                },
            );
            assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        },
    );
}

#[test]
fn nothing_survives_the_agent_dying() {
    as_root_and_nobody(
        "sandbox::escapees::nothing_survives_the_agent_dying",
        || {
            if !namespaces() {
                return;
            }
            // The agent's death SIGKILLs the process it spawned (the engine's parent-death signal);
            // here we SIGKILL that process alone: the namespace's init follows it, and everything with it.
            let dir = tempfile::tempdir().unwrap();
            let mark = marker("agent");
            let running = spawn(
                &script(&mark, dir.path(), "sleep 1000"),
                Mode::Full,
                dir.path(),
            );
            wait_for_file(&dir.path().join("ready"));
            assert_eq!(processes_with(&mark).len(), 3);
            unsafe { libc::kill(running.pid(), libc::SIGKILL) };
            wait_until_gone(&mark);
            let (status, _) = running.finish();
            assert_eq!(status.signal(), Some(libc::SIGKILL));
        },
    );
}

#[test]
fn nothing_survives_long_without_the_engines_final_kill() {
    as_root_and_nobody(
        "sandbox::escapees::nothing_survives_long_without_the_engines_final_kill",
        || {
            if !namespaces() {
                return;
            }
            // If nobody SIGKILLs the group after the shell exits (the agent died right then), PID 1
            // still ends the namespace once the linger time is over.
            let dir = tempfile::tempdir().unwrap();
            let mark = marker("linger");
            let running = spawn(
                &script(&mark, dir.path(), "exit 0"),
                Mode::Workspace,
                dir.path(),
            );
            wait_for_file(&dir.path().join("ready"));
            let (status, _) = running.finish_without_group_kill();
            assert_eq!(status.code(), Some(0));
            let ended = Instant::now();
            wait_until_gone(&mark);
            assert!(
                ended.elapsed() < Duration::from_secs(10),
                "{:?}",
                ended.elapsed()
            );
        },
    );
}

#[test]
fn a_background_job_can_still_print_after_the_shell_exits() {
    as_root_and_nobody(
        "sandbox::escapees::a_background_job_can_still_print_after_the_shell_exits",
        || {
            let dir = tempfile::tempdir().unwrap();
            let (status, output) = spawn(
                "(sleep 0.2; echo late) & echo early",
                Mode::Workspace,
                dir.path(),
            )
            .finish();
            assert!(status.success());
            assert_eq!(output, "early\nlate\n");
        },
    );
}

#[test]
fn a_group_signal_reaches_the_shell_once() {
    as_root_and_nobody(
        "sandbox::escapees::a_group_signal_reaches_the_shell_once",
        || {
            if !namespaces() {
                return;
            }
            let dir = tempfile::tempdir().unwrap();
            let script = "trap 'n=$((n+1)); echo $n >> count' USR1; echo ready > ready; \
                      until [ -e go ]; do sleep 0.01; done; echo n=$n";
            let running = spawn(script, Mode::Workspace, dir.path());
            wait_for_file(&dir.path().join("ready"));
            running.signal_group(libc::SIGUSR1);
            wait_for_file(&dir.path().join("count"));
            std::fs::write(dir.path().join("go"), "").unwrap();
            let (status, output) = running.finish();
            assert!(status.success());
            assert!(output.ends_with("n=1\n"), "{output}");
        },
    );
}

#[test]
fn zombies_are_reaped_and_exit_statuses_come_through() {
    as_root_and_nobody(
        "sandbox::escapees::zombies_are_reaped_and_exit_statuses_come_through",
        || {
            let dir = tempfile::tempdir().unwrap();
            // Double-forked children that exit are reaped by PID 1 (no zombie pile-up), and the
            // shell's own status is reported as if there were no sandbox.
            let script = "for i in $(seq 20); do ( ( true ) & ) ; done; sleep 0.2; \
                      ls /proc | grep -c '^[0-9]' >/dev/null; \
                      z=$(grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l); echo zombies=$z; kill -TERM $$";
            let (status, output) = spawn(script, Mode::Workspace, dir.path()).finish();
            assert_eq!(output, "zombies=0\n");
            assert_eq!(status.signal(), Some(libc::SIGTERM));
        },
    );
}

/// The fallback where namespaces don't work: a subreaper between the engine and the shell.
fn without_namespaces() -> Support {
    let mut support = Support::current().clone();
    support.namespaces = Err("test: pretend there are none".into());
    support.private_proc = Err("test: off".into());
    support.network_namespace = Err("test: off".into());
    support
}

#[test]
fn without_namespaces_nothing_survives_a_normal_end_or_a_timeout() {
    as_root_and_nobody(
        "sandbox::escapees::without_namespaces_nothing_survives_a_normal_end_or_a_timeout",
        || {
            let support = without_namespaces();
            let status = check_with(&support, Mode::Workspace, "exit 7", |_, _| {});
            assert_eq!(status.code(), Some(7));
            let status = check_with(&support, Mode::Full, "sleep 1000", |running, _| {
                running.signal_group(libc::SIGTERM)
            });
            assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
        },
    );
}

#[test]
fn without_namespaces_nothing_survives_the_agent_dying() {
    as_root_and_nobody(
        "sandbox::escapees::without_namespaces_nothing_survives_the_agent_dying",
        || {
            // The agent's death reaches the subreaper as SIGPWR (its parent-death signal); sent here
            // by hand, since this test process is the "agent" and must live on.
            let support = without_namespaces();
            let status = check_with(
                &support,
                Mode::Workspace,
                "sleep 1000",
                |running, _| unsafe {
                    libc::kill(running.pid(), libc::SIGPWR);
                },
            );
            assert_eq!(status.code(), Some(128 + libc::SIGKILL), "{status:?}");
        },
    );
}

#[test]
fn without_namespaces_a_background_job_can_still_print_after_the_shell_exits() {
    as_root_and_nobody("sandbox::escapees::without_namespaces_a_background_job_can_still_print_after_the_shell_exits", || {
        let dir = tempfile::tempdir().unwrap();
        let (status, output) = spawn_with(
            "(sleep 0.1; echo late) & echo early",
            Mode::Workspace,
            dir.path(),
            &without_namespaces(),
        )
        .finish();
        assert!(status.success());
        assert_eq!(output, "early\nlate\n");
    });
}

#[test]
fn without_namespaces_nothing_survives_a_shell_that_ignores_sigterm() {
    as_root_and_nobody(
        "sandbox::escapees::without_namespaces_nothing_survives_a_shell_that_ignores_sigterm",
        || {
            // The engine sends SIGTERM twice before SIGKILL; at the second the subreaper kills
            // everything itself (a SIGKILL would end it before it could).
            let support = without_namespaces();
            let status = check_with(
                &support,
                Mode::Workspace,
                "trap '' TERM; while :; do sleep 0.05; done",
                |running, _| {
                    running.signal_group(libc::SIGTERM);
                    // Two TERMs sent before W took the first would merge into one: the second
                    // goes only once the first has left W's pending set (what the engine's
                    // 100 ms gap between them is for).
                    wait_until_delivered(running.pid(), libc::SIGTERM);
                    running.signal_group(libc::SIGTERM);
                },
            );
            assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        },
    );
}

/// Run by [`nothing_survives_a_real_agent_being_killed`] in a child process of the test: plays
/// the agent, starts a confined command with escapees, then waits to be killed.
#[test]
#[ignore]
fn fake_agent() {
    let Some(dir) = std::env::var_os("ACPBASH_FAKE_AGENT_DIR") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let mark = std::env::var("ACPBASH_FAKE_AGENT_MARK").unwrap();
    let support = if std::env::var_os("ACPBASH_FAKE_AGENT_NO_NS").is_some() {
        without_namespaces()
    } else {
        Support::current().clone()
    };
    let _running = spawn_with(
        &script(&mark, &dir, "sleep 1000"),
        Mode::Workspace,
        &dir,
        &support,
    );
    // Waits to be killed (by the test that started it), not for any time to pass.
    loop {
        std::thread::park();
    }
}

fn kill_a_real_agent(no_namespaces: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mark = marker("realagent");
    let mut agent = std::process::Command::new(std::env::current_exe().unwrap());
    agent
        .args([
            "--exact",
            "sandbox::escapees::fake_agent",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ACPBASH_FAKE_AGENT_DIR", dir.path())
        .env("ACPBASH_FAKE_AGENT_MARK", &mark)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    if no_namespaces {
        agent.env("ACPBASH_FAKE_AGENT_NO_NS", "1");
    }
    let mut agent = agent.spawn().unwrap();
    wait_for_file(&dir.path().join("ready"));
    assert_eq!(processes_with(&mark).len(), 3);
    agent.kill().unwrap(); // SIGKILL: no cleanup code of the agent runs
    agent.wait().unwrap();
    wait_until_gone(&mark);
}

#[test]
fn nothing_survives_a_real_agent_being_killed() {
    as_root_and_nobody(
        "sandbox::escapees::nothing_survives_a_real_agent_being_killed",
        || {
            if !namespaces() {
                return;
            }
            kill_a_real_agent(false);
        },
    );
}

#[test]
fn without_namespaces_nothing_survives_a_real_agent_being_killed() {
    as_root_and_nobody(
        "sandbox::escapees::without_namespaces_nothing_survives_a_real_agent_being_killed",
        || {
            kill_a_real_agent(true);
        },
    );
}
