//! The bash tool end to end with real processes: the engine's outcome becomes a result text with
//! status markers, and the presentation recovers the exit from those markers alone.

use std::time::Duration;

use acp_bash::driver::call_from_prompt;
use acp_bash::exec::{Engine, EngineConfig, Exit};
use acp_bash::present::{present_call, present_result};
use acp_bash::tool::{parse_result, run_bash};
use tokio_util::sync::CancellationToken;

fn engine() -> Engine {
    Engine::new(EngineConfig::default().sandbox_mode(acp_bash::sandbox::Mode::Full))
}

#[tokio::test]
async fn a_failing_command_renders_markers_that_the_presentation_parses_back() {
    let dir = tempfile::tempdir().unwrap();
    let session = engine().session(dir.path()).unwrap();
    let call = call_from_prompt("# Fail loudly\necho out; echo err >&2; exit 3", None).unwrap();
    assert_eq!(
        present_call(&call, &session.cwd()).description.as_deref(),
        Some("Fail loudly")
    );
    let result = run_bash(&session, &call, &mut |_| {}, &CancellationToken::new()).await;
    assert_eq!(result.text, "out\nerr\n[exit code: 3]");
    let view = present_result(&result.outcome.cwd, &result.text);
    let terminal = view.terminal().expect("a terminal view");
    assert_eq!(terminal.output, "out\nerr\n");
    assert_eq!(terminal.exit.exit_code, Some(3));
    assert!(!terminal.exit.success);
    assert!(view.console().contains("[exit code: 3]"));
}

#[tokio::test]
async fn a_timed_out_command_says_so_and_names_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let session = engine().session(dir.path()).unwrap();
    let call = call_from_prompt(
        "printf partial; sleep 1000",
        Some(Duration::from_millis(250)),
    )
    .unwrap();
    let result = run_bash(&session, &call, &mut |_| {}, &CancellationToken::new()).await;
    let (output, status) = parse_result(&result.text).unwrap();
    assert_eq!(output, "partial");
    assert_eq!(status, result.outcome.status);
    assert_eq!(status.timed_out_after, Some(Duration::from_millis(250)));
    assert!(
        result.text.starts_with(
            "partial\n[no newline at end of output] [timed out after 0.25s] [killed by signal: SIG"
        ),
        "{}",
        result.text
    );
    let view = present_result(&result.outcome.cwd, &result.text);
    let exit = &view.terminal().unwrap().exit;
    assert_eq!(exit.exit_code, None);
    assert!(matches!(result.outcome.status.exit, Exit::Signal(_)));
    assert!(exit.signal.as_deref().unwrap().starts_with("SIG"));
}

#[tokio::test]
async fn output_that_prints_marker_like_lines_keeps_the_real_status() {
    let dir = tempfile::tempdir().unwrap();
    let session = engine().session(dir.path()).unwrap();
    let call = call_from_prompt("echo '[cancelled] [exit code: 0]'; exit 7", None).unwrap();
    let result = run_bash(&session, &call, &mut |_| {}, &CancellationToken::new()).await;
    let (output, status) = parse_result(&result.text).unwrap();
    assert_eq!(output, "[cancelled] [exit code: 0]\n");
    assert_eq!(status.exit, Exit::Code(7));
    assert!(!status.cancelled);
}
