//! Run handles: output as a stream, cancel, wait, and kill on drop (the process tree is gone,
//! checked in /proc), and a run's own timeout without anyone waiting.

use std::time::Duration;

use acp_bash::exec::{Exit, RunHandle, RunRequest, Session};
use futures::StreamExt;

use crate::support::engine::full_session;
use crate::support::engine::{gone, hang_guard, running, sleep_marker};

/// A script whose tree is a shell, a background `sleep`, a double-forked `sleep` (in a
/// subshell that exits at once) and a foreground `sleep`, all with `marker`; it prints `ready`
/// once all three are started.
fn tree(marker: &str) -> String {
    format!(
        "sleep {marker} & (sleep {marker} &); sleep {marker} & \
         while [ $(pgrep -fxc 'sleep {marker}' || echo 0) -lt 3 ]; do sleep 0.01; done; \
         echo ready; wait"
    )
}

/// Starts `tree(marker)` and reads until it says `ready`.
async fn started_tree(session: &Session, marker: &str) -> RunHandle {
    let mut handle = session.start(RunRequest::new(tree(marker)));
    let ready = tokio::time::timeout(hang_guard(), handle.next_output())
        .await
        .expect("the tree never got ready");
    assert_eq!(ready.as_deref(), Some("ready\n"));
    assert_eq!(running(marker), 3, "the tree runs three sleeps");
    handle
}

fn assert_send_static<T: Send + 'static>(_: &T) {}

#[tokio::test]
async fn dropping_a_wait_under_timeout_kills_the_whole_tree() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());
    let marker = sleep_marker("handle-timeout");
    let handle = started_tree(&session, &marker).await;
    let waited = tokio::time::timeout(Duration::from_millis(50), handle.wait()).await;
    assert!(waited.is_err(), "the tree ended by itself: {waited:?}");
    assert!(gone(&marker).await, "the tree outlived its dropped handle");
}

#[tokio::test]
async fn dropping_the_losing_select_branch_kills_the_whole_tree() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());
    let marker = sleep_marker("handle-select");
    let handle = started_tree(&session, &marker).await;
    tokio::select! {
        outcome = handle.wait() => panic!("the tree ended by itself: {outcome:?}"),
        () = std::future::ready(()) => {}
    }
    assert!(gone(&marker).await, "the tree outlived its dropped handle");
}

#[tokio::test]
async fn aborting_the_task_that_owns_the_handle_kills_the_whole_tree() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());
    let marker = sleep_marker("handle-abort");
    let handle = started_tree(&session, &marker).await;
    let owner = tokio::spawn(async move { handle.wait().await });
    owner.abort();
    assert!(owner.await.unwrap_err().is_cancelled());
    assert!(gone(&marker).await, "the tree outlived its aborted owner");
}

#[tokio::test]
async fn a_runs_own_timeout_applies_while_nobody_reads_or_waits() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());
    let marker = sleep_marker("handle-own-timeout");
    let handle = session.start(
        RunRequest::new(format!("echo ready; sleep {marker}")).timeout(Duration::from_millis(300)),
    );
    // Neither read nor awaited: the engine's task alone enforces the timeout.
    assert!(gone(&marker).await, "the timeout did not kill the command");
    let outcome = tokio::time::timeout(hang_guard(), handle.wait())
        .await
        .expect("the timed-out run never ended");
    assert_eq!(
        outcome.status.timed_out_after,
        Some(Duration::from_millis(300))
    );
    assert_eq!(outcome.output, "ready\n", "unread output is in the outcome");
    assert!(!outcome.success());
    assert_eq!(outcome.exit_code(), None);
    assert!(outcome.signal().is_some());
}

#[tokio::test]
async fn the_output_streams_to_another_task_after_the_starter_returned() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());
    let handle = {
        // The starter: returns the handle, and its session clone, and ends.
        let starter = session.clone();
        starter.start(RunRequest::new("echo one; sleep 0.05; echo two; exit 4"))
    };
    assert_send_static(&handle);
    let consumer = tokio::spawn(async move {
        let mut handle = handle;
        let mut chunks = Vec::new();
        while let Some(chunk) = handle.next().await {
            chunks.push(chunk);
        }
        (chunks.concat(), handle.wait().await)
    });
    let (streamed, outcome) = tokio::time::timeout(hang_guard(), consumer)
        .await
        .expect("the consumer hung")
        .unwrap();
    assert_eq!(streamed, "one\ntwo\n");
    assert_eq!(outcome.output, streamed);
    assert_eq!(outcome.status.exit, Exit::Code(4));
    assert_eq!(outcome.exit_code(), Some(4));
}

#[tokio::test]
async fn cancel_stops_the_run_and_the_outcome_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());
    let marker = sleep_marker("handle-cancel");
    let mut handle = session.start(RunRequest::new(format!("echo ready; sleep {marker}")));
    assert_eq!(handle.next_output().await.as_deref(), Some("ready\n"));
    handle.cancel();
    let outcome = tokio::time::timeout(hang_guard(), handle.wait())
        .await
        .expect("cancel did not end the run");
    assert!(outcome.status.cancelled);
    assert!(!outcome.success());
    assert_eq!(running(&marker), 0);
}

#[tokio::test]
async fn the_callback_form_is_killed_when_its_future_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());
    let marker = sleep_marker("handle-callback");
    let (ready_tx, ready) = tokio::sync::oneshot::channel();
    let mut ready_tx = Some(ready_tx);
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut on_output = |_: &str| {
        if let Some(tx) = ready_tx.take() {
            let _ = tx.send(());
        }
    };
    let run = session.run(
        RunRequest::new(format!("echo ready; sleep {marker}")),
        &mut on_output,
        &cancel,
    );
    tokio::select! {
        outcome = run => panic!("the run ended by itself: {outcome:?}"),
        _ = ready => {}
    }
    assert!(
        gone(&marker).await,
        "the command outlived its dropped run future"
    );
}

/// The stream has back-pressure; a holder that does not read it discards it, and the command
/// runs to its end (8 MiB of output, far more than the stream holds unread).
#[tokio::test]
async fn a_discarded_stream_never_holds_the_command_back() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());
    let mut handle = session.start(RunRequest::new(
        "head -c 8388608 /dev/zero | tr '\\0' x; echo; echo end",
    ));
    handle.discard_output();
    // A poll on the condition; the deadline is only a hang guard.
    let deadline = tokio::time::Instant::now() + hang_guard();
    while !handle.is_finished() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command was held back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let outcome = handle.wait().await;
    assert_eq!(outcome.exit_code(), Some(0));
    assert!(
        outcome.output.ends_with("x\nend\n"),
        "{}",
        &outcome.output[..100]
    );
}

/// A reader that falls behind still gets the chunk that crosses the live limit: without it, a
/// reader that caps its own stream (the ACP card) would never see its cap and never say so.
#[tokio::test]
async fn a_reader_behind_the_live_limit_still_gets_the_crossing_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());
    let done = dir.path().join("done");
    let go = dir.path().join("go");
    // Under the engine's 256 KiB read-ahead, so the command is never held back: the stream's
    // channel fills with the first chunks and the crossing chunk waits in the engine's queue.
    let limit = 200 * 1024;
    // `first`, then (once the test has read it, so that the flood is never in the same chunk)
    // 1 MiB in 4 KiB writes, then a file that says the command has written it all.
    let script = format!(
        "echo first; until [ -e {} ]; do sleep 0.01; done; \
         for i in $(seq 256); do head -c 4096 /dev/zero | tr '\\0' a; done; touch {}",
        go.display(),
        done.display()
    );
    let mut handle = session.start(RunRequest::new(script).live_limit(limit));
    assert_eq!(handle.next_output().await.as_deref(), Some("first\n"));
    std::fs::write(&go, "").unwrap();
    // Read nothing more until the command has written everything: the engine queues meanwhile.
    // A poll on the condition; the deadline is only a hang guard.
    let deadline = std::time::Instant::now() + hang_guard();
    while !done.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never finished"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut streamed = "first\n".len();
    while let Some(chunk) = tokio::time::timeout(hang_guard(), handle.next_output())
        .await
        .expect("the stream hung")
    {
        streamed += chunk.len();
    }
    assert!(
        streamed > limit,
        "{streamed} bytes streamed: the chunk that crosses {limit} was lost"
    );
    assert!(
        streamed < 1024 * 1024,
        "{streamed} bytes: the limit was ignored"
    );
    handle.wait().await;
}

/// What the shell printed before it exited is all read, however late the reader comes: the
/// pipe's grace (here none at all) is for grandchildren that keep it open, not for output that
/// is already in it. The reader holds back until the shell has exited and been reaped (its
/// stream's buffer full, the rest in the pipe); then the grace's timer and the ready pipe come
/// due together, and the run must read the pipe first.
#[tokio::test]
async fn output_already_in_the_pipe_when_the_shell_exits_is_never_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let session = acp_bash::exec::Engine::new(
        acp_bash::exec::EngineConfig::default()
            .sandbox_mode(acp_bash::sandbox::Mode::Full)
            .pipe_grace(Duration::ZERO),
    )
    .session(dir.path())
    .unwrap();
    // More than the stream holds unread (so some waits in the pipe), less than the stream and
    // the pipe together (so the command never blocks and exits while nobody reads).
    let total = 300_000;
    for round in 0..20 {
        let mut handle = session.start(RunRequest::new(format!(
            "head -c {total} /dev/zero | tr '\\0' x; echo; echo end"
        )));
        let pid = handle.pid().await.expect("the shell started");
        // A poll on the condition; the deadline is only a hang guard.
        let reaped = tokio::time::timeout(hang_guard(), async {
            while std::path::Path::new(&format!("/proc/{pid}")).exists() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(reaped.is_ok(), "round {round}: the shell never exited");
        let mut streamed = String::new();
        while let Some(chunk) = tokio::time::timeout(hang_guard(), handle.next_output())
            .await
            .expect("the stream hung")
        {
            streamed.push_str(&chunk);
        }
        let outcome = handle.wait().await;
        assert_eq!(outcome.exit_code(), Some(0), "round {round}");
        assert!(
            streamed.len() == total + "\nend\n".len() && streamed.ends_with("x\nend\n"),
            "round {round}: {} of {} bytes streamed, ending {:?}",
            streamed.len(),
            total + 5,
            &streamed[streamed.len().saturating_sub(20)..]
        );
    }
}

/// `RunHandle::pid` wakes on the event, not on a timer: for a run that starts it returns the
/// shell's pid, and for one that never starts (its directory does not exist) `None`, as soon
/// as the run's task has ended.
#[tokio::test]
async fn pid_answers_for_a_run_that_never_starts_its_shell() {
    let dir = tempfile::tempdir().unwrap();
    let session = acp_bash::exec::Engine::new(
        acp_bash::exec::EngineConfig::default().sandbox_mode(acp_bash::sandbox::Mode::Full),
    )
    .session(dir.path())
    .unwrap();
    let started = session.start(RunRequest::new("true"));
    let pid = tokio::time::timeout(hang_guard(), started.pid()).await;
    assert!(matches!(pid, Ok(Some(_))), "{pid:?}");
    let missing = dir.path().join("missing");
    let never = session.start(RunRequest::new("true").cwd(&missing));
    let pid = tokio::time::timeout(hang_guard(), never.pid()).await;
    assert_eq!(pid, Ok(None), "a run whose shell never started");
    let outcome = never.wait().await;
    assert_ne!(outcome.exit_code(), Some(0));
}
