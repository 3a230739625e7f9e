//! `acp::run_tool_call` / `ToolCallRunner` in-process: the whole tool call through one library
//! call, live output flushed on its deadline (events, not timing), client features respected.

use std::path::Path;

use acp_bash::acp::bridge::ClientFeatures;
use acp_bash::acp::ToolCallRunner;
use acp_bash::exec::{RunRequest, Session};
use acp_bash::tool::BashCall;
use agent_client_protocol::v1::schema::{SessionUpdate, ToolCallId, ToolCallStatus};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::support::engine::hang_guard;
use crate::support::engine::{full_session, mkfifo};

const CARD: ClientFeatures = ClientFeatures::CARD;
const PLAIN: ClientFeatures = ClientFeatures::PLAIN;

/// The `terminal_output` data of a card update.
fn card_data(update: &SessionUpdate) -> Option<String> {
    let SessionUpdate::ToolCallUpdate(update) = update else {
        return None;
    };
    let data = update.meta.as_ref()?.get("terminal_output")?.get("data")?;
    Some(data.as_str()?.to_string())
}

fn final_status(update: &SessionUpdate) -> Option<ToolCallStatus> {
    match update {
        SessionUpdate::ToolCallUpdate(update) => update.fields.status,
        _ => None,
    }
}

async fn next(updates: &mut mpsc::UnboundedReceiver<SessionUpdate>) -> SessionUpdate {
    tokio::time::timeout(hang_guard(), updates.recv())
        .await
        .expect("no update came (a batch waited past its deadline?)")
        .expect("the sink closed")
}

/// Runs `call` as `call-1` on a task; its updates come back over the channel.
fn start(
    session: &Session,
    call: BashCall,
    features: ClientFeatures,
) -> (
    mpsc::UnboundedReceiver<SessionUpdate>,
    tokio::task::JoinHandle<acp_bash::tool::BashResult>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let session = session.clone();
    let task = tokio::spawn(async move {
        let mut sink = move |update: SessionUpdate| {
            let _ = tx.send(update);
        };
        ToolCallRunner::new(features)
            .run(
                &session,
                &ToolCallId::new("call-1"),
                &call,
                &mut sink,
                &CancellationToken::new(),
            )
            .await
    });
    (rx, task)
}

/// `echo a; sleep 0.005; echo b` puts `b` in a batch that waits for its deadline; the command
/// then blocks on a fifo the test holds. `b` must reach the sink before the test lets the
/// command go on to print `c`: the batch was flushed on its deadline, not by the next chunk.
#[tokio::test]
async fn a_waiting_batch_goes_out_on_its_deadline_before_the_next_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("go");
    mkfifo(&fifo);
    let session = full_session(dir.path());
    let call = BashCall::new("echo a; sleep 0.005; echo b; read -r _ < go; echo c");
    let (mut updates, task) = start(&session, call, CARD);

    let SessionUpdate::ToolCall(opening) = next(&mut updates).await else {
        panic!("the first update is not the tool_call");
    };
    assert_eq!(
        opening.title,
        "echo a; sleep 0.005; echo b; read -r _ < go; echo c"
    );
    let mut streamed = String::new();
    while !streamed.contains("b\n") {
        let update = next(&mut updates).await;
        assert_eq!(final_status(&update), None, "ended before b: {update:?}");
        streamed.push_str(&card_data(&update).unwrap_or_default());
    }
    // Only now may the command print c.
    assert_eq!(streamed, "a\nb\n");
    let writer = tokio::task::spawn_blocking(move || std::fs::write(fifo, "go\n"));
    let last = loop {
        let update = next(&mut updates).await;
        if final_status(&update).is_some() {
            break update;
        }
        streamed.push_str(&card_data(&update).unwrap_or_default());
    };
    writer.await.unwrap().unwrap();
    assert_eq!(streamed, "a\nb\nc\n");
    assert_eq!(final_status(&last), Some(ToolCallStatus::Completed));
    let result = task.await.unwrap();
    assert_eq!(result.text, "a\nb\nc\n[exit code: 0]");
}

/// A plain client gets the tool_call and one final update with the console block (and maybe a
/// live console view between them, timing permitting: tests/it/acp/plain_clients.rs): no
/// terminal output, no terminal meta, anywhere.
#[tokio::test]
async fn a_plain_client_gets_no_terminal_output() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());
    let call = BashCall::new("echo one; sleep 0.05; echo two").description("Count");
    let (mut updates, task) = start(&session, call, PLAIN);
    let result = tokio::time::timeout(hang_guard(), task)
        .await
        .unwrap()
        .unwrap();
    let mut all = Vec::new();
    while let Ok(update) = updates.try_recv() {
        all.push(update);
    }
    let wire = serde_json::to_string(&all).unwrap();
    assert!(!wire.contains("terminal"), "{wire}");
    let live_view = |u: &SessionUpdate| {
        matches!(u, SessionUpdate::ToolCallUpdate(u)
            if u.fields.status.is_none() && u.fields.content.is_some())
    };
    all.retain(|u| !live_view(u));
    assert_eq!(all.len(), 2, "{wire}");
    assert_eq!(final_status(&all[1]), Some(ToolCallStatus::Completed));
    assert!(
        wire.contains("```console\\none\\ntwo\\n[exit code: 0]\\n```"),
        "{wire}"
    );
    assert_eq!(result.outcome.exit_code(), Some(0));
}

/// The card's header is the directory the command really runs in: a per-call cwd, not the
/// session's, and the session's cwd does not move.
#[tokio::test]
async fn the_card_shows_the_directory_the_command_runs_in() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let session = full_session(dir.path());
    let call = BashCall::from(RunRequest::new("pwd; cd /").cwd("sub"));
    let (mut updates, task) = start(&session, call, CARD);
    let SessionUpdate::ToolCall(opening) = next(&mut updates).await else {
        panic!("the first update is not the tool_call");
    };
    let sub = dir.path().join("sub");
    let meta = opening.meta.unwrap();
    assert_eq!(
        meta["terminal_info"]["cwd"].as_str(),
        Some(sub.to_str().unwrap())
    );
    let result = task.await.unwrap();
    assert_eq!(result.outcome.cwd, sub);
    assert_eq!(
        Path::new(result.outcome.output.trim_end())
            .canonicalize()
            .unwrap(),
        sub.canonicalize().unwrap()
    );
    assert_eq!(session.cwd(), dir.path(), "a per-call cwd is not persisted");
}

/// Runs the model's `arguments` as `call-1` with `runner`; returns what the model reads and
/// every update sent.
async fn model_call(
    session: &Session,
    runner: ToolCallRunner,
    arguments: &str,
) -> (String, Vec<SessionUpdate>) {
    let mut updates = Vec::new();
    let mut sink = |update: SessionUpdate| updates.push(update);
    let id = ToolCallId::new("call-1");
    let cancel = CancellationToken::new();
    let text = tokio::time::timeout(
        hang_guard(),
        runner.run_model_call(session, &id, arguments, &mut sink, &cancel),
    )
    .await
    .expect("the model call ended");
    (text, updates)
}

/// A model's valid arguments run as a whole tool call (opening `tool_call` with the model's
/// description, a completed final update), and the model reads plain text: no escapes, the
/// middle cut to the runner's budget, then the status line.
#[tokio::test]
async fn a_model_call_runs_and_the_model_reads_plain_text_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());
    let arguments = serde_json::json!({
        "command": r"printf '\033[1mbold\033[0m\n'; seq 1 2000",
        "description": "Count"
    })
    .to_string();
    let runner = ToolCallRunner::new(CARD).model_budget(200);
    let (text, updates) = model_call(&session, runner, &arguments).await;

    assert!(text.starts_with("bold\n1\n2\n"), "{text}");
    assert!(text.ends_with("1999\n2000\n[exit code: 0]"), "{text}");
    assert!(text.contains("bytes of output left out"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(text.len() < 200 + 100, "{} bytes: {text}", text.len());

    let SessionUpdate::ToolCall(opening) = &updates[0] else {
        panic!("the first update is not the tool_call: {updates:?}");
    };
    let opening = serde_json::to_value(opening).unwrap();
    assert!(opening.to_string().contains("Count"), "{opening}");
    assert_eq!(
        final_status(updates.last().unwrap()),
        Some(ToolCallStatus::Completed)
    );
}

/// Arguments the model got wrong run nothing and send nothing; the model reads what is wrong
/// and what is expected.
#[tokio::test]
async fn a_model_call_with_bad_arguments_runs_nothing_and_says_what_to_fix() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());
    for (arguments, problem) in [
        (r#"{"cmd": "touch made"}"#, "unknown field `cmd`"),
        (
            r#"{"command": "touch made", "timeout_ms": 0}"#,
            "`timeout_ms` is 0",
        ),
        ("touch made", "not JSON"),
    ] {
        let (text, updates) = model_call(&session, ToolCallRunner::new(PLAIN), arguments).await;
        assert!(updates.is_empty(), "{arguments}: {updates:?}");
        assert!(
            text.starts_with("invalid arguments for the bash tool: "),
            "{text}"
        );
        assert!(text.contains(problem), "{arguments}: {text}");
        assert!(text.contains("expected {\"command\": string"), "{text}");
    }
    assert!(!dir.path().join("made").exists(), "a bad call ran");
}

/// Runs `call` on a card client as `call-1` with `cancel`; returns every update (the card's
/// data joined) once the call has ended.
async fn card_run(
    session: &Session,
    call: BashCall,
    cancel: CancellationToken,
) -> (String, Vec<SessionUpdate>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let session = session.clone();
    let task = tokio::spawn(async move {
        let mut sink = move |update: SessionUpdate| {
            let _ = tx.send(update);
        };
        ToolCallRunner::new(CARD)
            .run(
                &session,
                &ToolCallId::new("call-1"),
                &call,
                &mut sink,
                &cancel,
            )
            .await
    });
    tokio::time::timeout(hang_guard(), task)
        .await
        .unwrap()
        .unwrap();
    let mut all = Vec::new();
    while let Ok(update) = rx.try_recv() {
        all.push(update);
    }
    let data = all.iter().filter_map(card_data).collect();
    (data, all)
}

/// Issue 21, point 4: on the card, a timeout, a cancel and a signal end with the status line
/// plain clients get (the marker renderer's words), on a line of its own, before the final
/// update; a plain exit adds nothing (the card shows its exit code).
#[tokio::test]
async fn a_card_says_how_a_timed_out_cancelled_or_signalled_command_ended() {
    let dir = tempfile::tempdir().unwrap();
    let session = full_session(dir.path());

    let timed_out = BashCall::from(
        RunRequest::new("echo started; exec sleep 30")
            .timeout(std::time::Duration::from_millis(300)),
    );
    let (data, _) = card_run(&session, timed_out, CancellationToken::new()).await;
    assert_eq!(
        data,
        "started\n[timed out after 0.3s] [killed by signal: SIGTERM]\r\n"
    );

    // Cancelled once the command is known to run (its file is there): no timing.
    let cancel = CancellationToken::new();
    let started = dir.path().join("started");
    let canceller = {
        let cancel = cancel.clone();
        let started = started.clone();
        tokio::spawn(async move {
            crate::support::acp::wait_for_file(&started).await;
            cancel.cancel();
        })
    };
    let cancelled = BashCall::new("printf 'no newline'; touch started; exec sleep 30");
    let (data, all) = card_run(&session, cancelled, cancel).await;
    canceller.await.unwrap();
    assert_eq!(
        data,
        "no newline\r\n[cancelled] [killed by signal: SIGTERM]\r\n"
    );
    assert_eq!(
        final_status(all.last().unwrap()),
        Some(ToolCallStatus::Failed)
    );

    let signalled = BashCall::new("echo bye; kill -KILL $$");
    let (data, _) = card_run(&session, signalled, CancellationToken::new()).await;
    assert_eq!(data, "bye\n[killed by signal: SIGKILL]\r\n");

    let exited = BashCall::new("echo done; exit 3");
    let (data, _) = card_run(&session, exited, CancellationToken::new()).await;
    assert_eq!(data, "done\n");
}
