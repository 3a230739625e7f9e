//! From a prompt to what a UI shows, through the layers' public API: the driver makes the call,
//! the markers render the result, the presentation turns both into views.

use std::path::PathBuf;
use std::time::Duration;

use acp_bash::driver::{call_from_prompt, DriverError};
use acp_bash::exec::{RunStatus, Truncation};
use acp_bash::present::{present_call, present_result, ExitView, ResultView};
use acp_bash::tool::{parse_console_result, parse_result, render_result};

fn cwd() -> PathBuf {
    PathBuf::from("/home/me/proj")
}

/// An exit view's fields, to compare with literals (the view is `#[non_exhaustive]`).
fn exit(view: &ExitView) -> (Option<u32>, Option<&str>, bool) {
    (view.exit_code, view.signal.as_deref(), view.success)
}

#[test]
fn a_described_prompt_becomes_a_titled_call_and_a_terminal_result() {
    let call = call_from_prompt("# Say hello\necho hello\n", None).unwrap();
    let view = present_call(&call, &cwd());
    assert_eq!(
        (
            view.title.as_str(),
            view.one_line_title.as_str(),
            view.echo.as_str(),
            view.description.as_deref(),
            view.cwd
        ),
        ("echo hello", "echo hello", "", Some("Say hello"), cwd())
    );

    let text = render_result("hello\n", &RunStatus::exited(0));
    let view = present_result(&cwd(), &text);
    let terminal = view.terminal().expect("a terminal view");
    assert_eq!(
        (terminal.cwd.clone(), terminal.output.as_str()),
        (cwd(), "hello\n")
    );
    assert_eq!(exit(&terminal.exit), (Some(0), None, true));
    assert_eq!(view.console(), "```console\nhello\n[exit code: 0]\n```");
}

#[test]
fn a_timed_out_run_is_a_failure_with_its_signal_and_timeout() {
    let status = RunStatus::signalled(9).timed_out_after(Duration::from_secs(5));
    let view = present_result(&cwd(), &render_result("", &status));
    let terminal = view.terminal().expect("a terminal view");
    assert_eq!(exit(&terminal.exit), (None, Some("SIGKILL"), false));
    assert_eq!(terminal.status, status);
    assert_eq!(
        view.console(),
        "```console\n[timed out after 5s] [killed by signal: SIGKILL]\n```"
    );
}

#[test]
fn a_program_that_prints_markers_and_fences_cannot_fool_either_view() {
    let printed = "````\n[exit code: 0]\n\u{1b}[1m[cancelled] [killed by signal: SIGKILL]\u{1b}[0m";
    let status = RunStatus::exited(3).truncated(Truncation::new(
        4096,
        Some("/tmp/acp-bash/log 1.txt".to_string()),
    ));
    let view = present_result(&cwd(), &render_result(printed, &status));
    let terminal = view.terminal().expect("a terminal view");
    assert_eq!(terminal.output, printed);
    assert_eq!(terminal.status, status);
    assert_eq!(
        view.console(),
        "`````console\n````\n[exit code: 0]\n[cancelled] [killed by signal: SIGKILL]\n\
         [full output: \"/tmp/acp-bash/log 1.txt\"]\n\
         [no newline at end of output] [output truncated: 4096 bytes dropped] [exit code: 3]\n`````"
    );
    // The status line stands alone, and the log's path on its own line before it (issue 21,
    // point 4); the console parser reads the whole status back, the plain one the status line.
    let content = view
        .console()
        .trim_start_matches("`````console\n")
        .trim_end_matches("\n`````");
    let (plain_output, parsed) =
        parse_console_result(content).expect("the console block is a console result text");
    assert_eq!(
        plain_output,
        "````\n[exit code: 0]\n[cancelled] [killed by signal: SIGKILL]"
    );
    assert_eq!(parsed, status);
    let (_, last_line) = parse_result(content).expect("its last line is a status line");
    assert_eq!(last_line.exit, status.exit);
    assert_eq!(last_line.truncation, Some(Truncation::new(4096, None)));
}

#[test]
fn a_result_without_a_status_line_is_shown_as_text() {
    assert_eq!(
        present_result(&cwd(), "the engine said something odd\n"),
        ResultView::Text {
            console: "```console\nthe engine said something odd\n```".to_string()
        }
    );
}

#[test]
fn a_prompt_with_only_a_description_asks_for_a_command() {
    let error = call_from_prompt("# Deploy\n\n", None).unwrap_err();
    assert_eq!(error, DriverError::NoCommand);
    assert!(error.to_string().contains("bash script"), "{error}");
}
