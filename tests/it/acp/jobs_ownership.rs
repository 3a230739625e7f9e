//! A job belongs to its session: nothing it started survives the agent stopping (SIGTERM) or
//! being killed (SIGKILL: no cleanup code runs, the sandbox's parent-death signal does it), in
//! every sandboxed mode. Escapees (setsid, double fork, nohup) are found by a marker.
#![cfg(target_os = "linux")]

use super::shutdown::RawAgent;
use crate::support::acp::*;
use crate::support::sandbox::{marker, processes_with, start_escapees, wait_until_gone};

/// Starts an agent in `mode` whose session runs a job that starts three escapees, and waits
/// until they run.
async fn agent_with_escaping_job(mode: &str, dir: &std::path::Path, mark: &str) -> RawAgent {
    let mut agent = RawAgent::spawn(&["--sandbox", mode]);
    agent
        .start(dir, &format!("/bg {}sleep 1000", start_escapees(mark)))
        .await;
    guard("the escapees run", async {
        while processes_with(mark).len() < 3 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    agent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_a_job_started_survives_the_agent_being_killed_in_any_sandboxed_mode() {
    for mode in ["workspace", "read-only", "full"] {
        let (_tmp, dir) = temp_dir();
        let mark = marker("jobkill");
        let mut agent = agent_with_escaping_job(mode, &dir, &mark).await;
        agent.child.start_kill().unwrap(); // SIGKILL
        agent.wait("the killed agent").await;
        wait_until_gone(&mark);
        eprintln!("{mode}: nothing left after SIGKILL");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_a_job_started_survives_sigterm() {
    let (_tmp, dir) = temp_dir();
    let mark = marker("jobterm");
    let mut agent = agent_with_escaping_job("workspace", &dir, &mark).await;
    let pid = agent.child.id().unwrap() as i32;
    // SAFETY: kill has no memory-safety preconditions; the pid is our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = agent.wait("exit after SIGTERM").await;
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    wait_until_gone(&mark);
}
