//! Two runs of one session at the same time (the documented semantics of `Session::start`):
//! both run at once; each starts in the session's cwd as it was when it started; a run that
//! changed directory moves the session when it ends, so the last such run to end wins; a run
//! that did not change directory leaves the cwd alone. The test orders the ends with fifos.

use std::path::Path;

use acp_bash::exec::{RunHandle, RunRequest, Session};

use crate::support::engine::hang_guard;
use crate::support::engine::{full_session, mkfifo};

/// Starts `script`, then `read < fifo`, and waits until the script printed `ready`.
async fn start_blocked(session: &Session, script: &str, fifo: &Path) -> RunHandle {
    mkfifo(fifo);
    let mut handle = session.start(RunRequest::new(format!(
        "{script}; echo ready; read -r _ < {}",
        fifo.display()
    )));
    let ready = tokio::time::timeout(hang_guard(), handle.next_output()).await;
    assert_eq!(ready.unwrap().as_deref(), Some("ready\n"));
    handle
}

async fn release(fifo: &Path, handle: RunHandle) -> acp_bash::exec::RunOutcome {
    let fifo = fifo.to_path_buf();
    tokio::task::spawn_blocking(move || std::fs::write(fifo, "go\n"))
        .await
        .unwrap()
        .unwrap();
    tokio::time::timeout(hang_guard(), handle.wait())
        .await
        .unwrap()
}

#[tokio::test]
async fn of_two_runs_that_cd_the_one_that_ends_last_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    for sub in ["a", "b"] {
        std::fs::create_dir(root.join(sub)).unwrap();
    }
    let session = full_session(&root);
    let a = start_blocked(&session, "cd a", &root.join("fifo-a")).await;
    let b = start_blocked(&session, "cd b", &root.join("fifo-b")).await;
    // Both run now, and both started in the root.
    assert_eq!((a.cwd(), b.cwd()), (root.as_path(), root.as_path()));
    let b = release(&root.join("fifo-b"), b).await;
    assert_eq!(session.cwd(), root.join("b"));
    let a = release(&root.join("fifo-a"), a).await;
    assert_eq!(session.cwd(), root.join("a"), "the last to end wins");
    assert_eq!((a.next_cwd, b.next_cwd), (root.join("a"), root.join("b")));
}

#[tokio::test]
async fn a_run_that_did_not_cd_does_not_undo_another_runs_cd() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("a")).unwrap();
    let session = full_session(&root);
    let stays = start_blocked(&session, "true", &root.join("fifo-stays")).await;
    let moves = start_blocked(&session, "cd a", &root.join("fifo-moves")).await;
    release(&root.join("fifo-moves"), moves).await;
    assert_eq!(session.cwd(), root.join("a"));
    let stayed = release(&root.join("fifo-stays"), stays).await;
    assert_eq!(stayed.cwd, root);
    assert_eq!(
        session.cwd(),
        root.join("a"),
        "the run that stayed undid the cd"
    );
}
