//! Presentation: what a UI shows for a bash call and its result, as plain values.
//!
//! Owns the provider-neutral views: [`present_call`] (title, description, cwd, known before the
//! run) and [`present_result`] (a terminal view with the output and the parsed exit, plus the
//! fenced ```` ```console ```` block every client can show), and the live-output policy
//! ([`stream`]: when output is sent, how much, the console view; [`live`]: the view's tail).
//! Pure functions over values: no ACP
//! types, no processes, no I/O, so a second UI (a TUI, a log) can use them too. Must not touch:
//! running commands, the marker format (it only calls [`crate::tool::markers`]), ACP.

pub mod ansi;
pub mod changes;
pub mod live;
pub mod mcp;
pub mod model;
pub mod script;
pub mod stream;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::classify::{classify, Classified};
use crate::exec::{signal_name, Exit, RunStatus};
use crate::tool::markers::{parse_result, render_console_result};
use crate::tool::{BashCall, BashResult};

/// How a call looks before it has run. Made by [`present_call`]; callers only read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallView {
    /// The command text, cut to [`script::MAX_ECHO_BYTES`]: execute cards hide raw input, so
    /// the command is the title of a terminal card (Zed shows it as a bash block).
    pub title: String,
    /// The title for clients that show titles on one line: the command itself when it is one
    /// line, else its first line and how many lines follow ([`script::one_line_title`]).
    pub one_line_title: String,
    /// A multi-line command as `$ ` lines for the top of a console block ([`script::echo_lines`]);
    /// empty for a one-line command.
    pub echo: String,
    /// The human description, shown above the card.
    pub description: Option<String>,
    /// Where the command runs (the card's header).
    pub cwd: PathBuf,
    /// What the command does, when the call asked to be classified ([`BashCall::classify`])
    /// and it is one read, search or listing: shown as that instead of a terminal.
    pub classified: Option<Classified>,
}

/// How a finished call looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultView {
    /// The result text ended with a status line: a terminal, and the console block fallback.
    Terminal {
        /// The terminal: output, exit, status.
        terminal: TerminalView,
        /// The fenced ```` ```console ```` block for clients without a terminal card.
        console: String,
    },
    /// The result text had no status line the markers parser accepts; shown as text only.
    Text {
        /// The text, fenced as a console block.
        console: String,
    },
}

impl ResultView {
    /// The console block: every view has one.
    pub fn console(&self) -> &str {
        match self {
            ResultView::Terminal { console, .. } | ResultView::Text { console } => console,
        }
    }

    /// The terminal view, when the result had a status line.
    pub fn terminal(&self) -> Option<&TerminalView> {
        match self {
            ResultView::Terminal { terminal, .. } => Some(terminal),
            ResultView::Text { .. } => None,
        }
    }
}

/// A finished run, shaped like a terminal: where it ran, what it printed, how it ended. Made by
/// [`present_result`] and [`present_run`]; callers only read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TerminalView {
    /// Where the command ran.
    pub cwd: PathBuf,
    /// The command's output as printed, escape sequences intact (a terminal renders them).
    pub output: String,
    /// How it ended.
    pub exit: ExitView,
    /// Everything the status line said (timeout, cancellation, truncation).
    pub status: RunStatus,
    /// How long the command ran, when the caller knows it ([`present_run`]); the result text
    /// does not say.
    pub duration: Option<Duration>,
}

/// How the process ended, in the shape terminal UIs take it: [`ExitView::of`] a status.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExitView {
    /// The exit code when it exited with a non-negative one.
    pub exit_code: Option<u32>,
    /// The signal's name (`SIGKILL`) when it was killed by one.
    pub signal: Option<String>,
    /// Exit code 0, and neither cancelled nor timed out.
    pub success: bool,
}

impl ExitView {
    /// The exit of `status`, as a terminal shows it.
    pub fn of(status: &RunStatus) -> Self {
        let (exit_code, signal) = match status.exit {
            Exit::Code(code) => (u32::try_from(code).ok(), None),
            Exit::Signal(signal) => (None, Some(signal_name(signal))),
        };
        let success =
            status.exit.is_success() && !status.cancelled && status.timed_out_after.is_none();
        ExitView {
            exit_code,
            signal,
            success,
        }
    }
}

/// The view of `call` before it runs, in `cwd` (where it really runs: [`crate::exec::RunHandle::cwd`]).
/// Nothing in it holds more than a few KiB of the command, however long the command is.
pub fn present_call(call: &BashCall, cwd: &Path) -> CallView {
    CallView {
        title: script::cut(call.command(), script::MAX_ECHO_BYTES),
        one_line_title: script::one_line_title(call.command()),
        echo: script::echo_lines(call.command()),
        description: call.description.clone(),
        cwd: cwd.to_path_buf(),
        classified: call
            .classify
            .then(|| classify(call.command(), cwd))
            .flatten(),
    }
}

/// Whether `call` is shown as a read, a search or a listing ([`CallView::classified`]) rather
/// than a terminal: known before it starts (what it is does not depend on where it runs).
pub fn is_classified(call: &BashCall) -> bool {
    call.classify && classify(call.command(), Path::new("/")).is_some()
}

/// The view of a finished result that ran in `cwd`, from a result text (output + status line)
/// alone: for foreign text, the only place the markers are parsed back. acp-bash's own results
/// are presented from their structure ([`present_ended`]).
pub fn present_result(cwd: &Path, result_text: &str) -> ResultView {
    present_result_after(cwd, "", result_text)
}

/// The view of a finished call, from what the engine reported ([`crate::exec::RunOutcome`]):
/// its console block starts with the call's `$ ` lines ([`CallView::echo`]), then the output as
/// plain text, then the status line; the terminal view has how long the command ran.
pub fn present_run(view: &CallView, result: &BashResult) -> ResultView {
    let outcome = &result.outcome;
    present_ended(
        &outcome.cwd,
        &view.echo,
        &outcome.output,
        &outcome.status,
        Some(outcome.duration),
    )
}

/// The view of a run that ended with `status` after printing `output` (the engine's outcome, or
/// a stored record of it), in `cwd`; the console block starts with `echo`. The status line is
/// rendered here, once, from the structure: nothing is parsed back from text.
pub fn present_ended(
    cwd: &Path,
    echo: &str,
    output: &str,
    status: &crate::exec::RunStatus,
    duration: Option<std::time::Duration>,
) -> ResultView {
    let plain = render_console_result(&ansi::to_plain_text(output), status);
    let console = console_block(&format!("{echo}{plain}"));
    let terminal = TerminalView {
        cwd: cwd.to_path_buf(),
        exit: ExitView::of(status),
        output: output.to_string(),
        status: status.clone(),
        duration,
    };
    ResultView::Terminal { terminal, console }
}

/// [`present_result`], the console block starting with `echo`.
fn present_result_after(cwd: &Path, echo: &str, result_text: &str) -> ResultView {
    match parse_result(result_text) {
        Ok((output, status)) => {
            let plain = render_console_result(&ansi::to_plain_text(&output), &status);
            let console = console_block(&format!("{echo}{plain}"));
            let terminal = TerminalView {
                cwd: cwd.to_path_buf(),
                exit: ExitView::of(&status),
                output,
                status,
                duration: None,
            };
            ResultView::Terminal { terminal, console }
        }
        Err(_) => ResultView::Text {
            console: console_block(&format!("{echo}{}", ansi::to_plain_text(result_text))),
        },
    }
}

/// `content` in a ```` ```console ```` fence one backtick longer than the longest run of
/// backticks inside it (at least three), so no line of the content can close the fence early.
pub fn console_block(content: &str) -> String {
    let fence = "`".repeat(longest_backtick_run(content).max(2) + 1);
    let newline = if content.is_empty() || content.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    format!("{fence}console\n{content}{newline}{fence}")
}

fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Truncation;
    use std::time::Duration;

    fn call(command: &str) -> BashCall {
        BashCall::new(command).description("Say hi")
    }

    fn cwd() -> PathBuf {
        PathBuf::from("/home/me/proj")
    }

    fn terminal(view: &ResultView) -> &TerminalView {
        view.terminal()
            .unwrap_or_else(|| panic!("expected a terminal view, got {view:?}"))
    }

    #[test]
    fn a_call_is_titled_by_its_command() {
        let view = present_call(&call("echo hi"), &cwd());
        assert_eq!(
            view,
            CallView {
                title: "echo hi".to_string(),
                one_line_title: "echo hi".to_string(),
                echo: String::new(),
                description: Some("Say hi".to_string()),
                cwd: PathBuf::from("/home/me/proj"),
                classified: None,
            }
        );
    }

    #[test]
    fn only_a_call_that_asks_is_classified() {
        let asked = BashCall::new("cat f").classified(true);
        let view = present_call(&asked, &cwd());
        let classified = view.classified.expect("a read");
        assert_eq!(classified.title, "Read f");
        assert_eq!(
            classified.locations[0].path,
            PathBuf::from("/home/me/proj/f")
        );
        assert!(is_classified(&asked));
        assert_eq!(present_call(&call("cat f"), &cwd()).classified, None);
        assert!(!is_classified(&call("cat f")));
        let other = BashCall::new("cargo test").classified(true);
        assert_eq!(present_call(&other, &cwd()).classified, None);
        assert!(!is_classified(&other));
    }

    #[test]
    fn a_multi_line_call_has_a_one_line_title_and_echoes_its_script() {
        let view = present_call(&call("mkdir -p out\ntouch out/a\nls out"), &cwd());
        assert_eq!(view.title, "mkdir -p out\ntouch out/a\nls out");
        assert_eq!(view.one_line_title, "mkdir -p out … (2 more lines)");
        assert_eq!(view.echo, "$ mkdir -p out\n$ touch out/a\n$ ls out\n");
        let result = present_result_after(&cwd(), &view.echo, "a\n[exit code: 0]");
        assert_eq!(
            result.console(),
            "```console\n$ mkdir -p out\n$ touch out/a\n$ ls out\na\n[exit code: 0]\n```"
        );
    }

    #[test]
    fn a_huge_command_is_not_copied_into_its_view() {
        let command = "true\n".repeat(2_000_000);
        let view = present_call(&call(&command), &cwd());
        assert!(view.title.len() < 4200, "{}", view.title.len());
        assert!(
            view.title.ends_with("more bytes)"),
            "{}",
            &view.title[4000..]
        );
        assert_eq!(view.one_line_title, "true … (1999999 more lines)");
        assert_eq!(view.echo.lines().count(), script::MAX_ECHO_LINES);
    }

    #[test]
    fn a_successful_run_is_a_terminal_and_a_console_block() {
        let view = present_result(&cwd(), "hi\n[exit code: 0]");
        assert_eq!(
            view,
            ResultView::Terminal {
                terminal: TerminalView {
                    cwd: PathBuf::from("/home/me/proj"),
                    output: "hi\n".to_string(),
                    exit: ExitView {
                        exit_code: Some(0),
                        signal: None,
                        success: true
                    },
                    status: RunStatus::exited(0),
                    duration: None,
                },
                console: "```console\nhi\n[exit code: 0]\n```".to_string(),
            }
        );
    }

    #[test]
    fn the_terminal_keeps_escapes_and_the_console_block_drops_them() {
        let text = "\u{1b}[32mok\u{1b}[0m\n10%\r100%\n[exit code: 0]";
        let view = present_result(&cwd(), text);
        assert_eq!(terminal(&view).output, "\u{1b}[32mok\u{1b}[0m\n10%\r100%\n");
        assert_eq!(view.console(), "```console\nok\n100%\n[exit code: 0]\n```");
    }

    #[test]
    fn output_without_a_final_newline_keeps_its_marker_in_the_console_block() {
        let view = present_result(&cwd(), "hi\n[no newline at end of output] [exit code: 0]");
        assert_eq!(terminal(&view).output, "hi");
        assert_eq!(
            view.console(),
            "```console\nhi\n[no newline at end of output] [exit code: 0]\n```"
        );
    }

    #[test]
    fn an_empty_run_shows_only_its_status() {
        let view = present_result(&cwd(), "[exit code: 0]");
        assert_eq!(terminal(&view).output, "");
        assert_eq!(view.console(), "```console\n[exit code: 0]\n```");
    }

    #[test]
    fn a_failing_exit_code_is_not_success() {
        let view = present_result(&cwd(), "[exit code: 1]");
        assert_eq!(
            terminal(&view).exit,
            ExitView {
                exit_code: Some(1),
                signal: None,
                success: false
            }
        );
    }

    #[test]
    fn a_signal_is_reported_by_name_without_an_exit_code() {
        let view = present_result(&cwd(), "[killed by signal: SIGKILL]");
        assert_eq!(
            terminal(&view).exit,
            ExitView {
                exit_code: None,
                signal: Some("SIGKILL".to_string()),
                success: false
            }
        );
    }

    #[test]
    fn a_negative_exit_code_has_no_unsigned_form() {
        let exit = ExitView::of(&RunStatus::exited(-2));
        assert_eq!(
            exit,
            ExitView {
                exit_code: None,
                signal: None,
                success: false
            }
        );
    }

    #[test]
    fn cancelled_or_timed_out_is_never_success_even_with_exit_code_zero() {
        let cancelled = RunStatus {
            cancelled: true,
            ..RunStatus::exited(0)
        };
        assert!(!ExitView::of(&cancelled).success);
        let timed_out = RunStatus {
            timed_out_after: Some(Duration::from_secs(5)),
            ..RunStatus::exited(0)
        };
        assert!(!ExitView::of(&timed_out).success);
    }

    #[test]
    fn truncation_alone_does_not_make_a_run_fail() {
        let truncated = RunStatus {
            truncation: Some(Truncation {
                dropped_bytes: 9,
                full_output: None,
                log_holds_first: None,
            }),
            ..RunStatus::exited(0)
        };
        assert!(ExitView::of(&truncated).success);
    }

    #[test]
    fn the_whole_status_reaches_the_terminal_view() {
        let text = "partial\n[timed out after 2.5s] [killed by signal: SIGTERM]";
        let view = present_result(&cwd(), text);
        assert_eq!(
            terminal(&view).status,
            RunStatus {
                exit: Exit::Signal(15),
                timed_out_after: Some(Duration::from_millis(2500)),
                cancelled: false,
                truncation: None,
            }
        );
    }

    #[test]
    fn text_without_a_status_line_is_shown_as_text() {
        let view = present_result(&cwd(), "\u{1b}[1msomething went wrong\u{1b}[0m\n");
        assert_eq!(
            view,
            ResultView::Text {
                console: "```console\nsomething went wrong\n```".to_string()
            }
        );
    }

    #[test]
    fn backticks_in_the_output_lengthen_the_fence() {
        let view = present_result(&cwd(), "```rust\nfn main() {}\n```\n[exit code: 0]");
        assert_eq!(
            view.console(),
            "````console\n```rust\nfn main() {}\n```\n[exit code: 0]\n````"
        );
        assert!(console_block("a ````` b").starts_with("``````console\n"));
        assert!(console_block("one ` two `` three").starts_with("```console\n"));
    }

    #[test]
    fn the_console_block_content_is_itself_a_result_text() {
        // A client (or a test) can parse the status back out of the console block.
        let view = present_result(&cwd(), "\u{1b}[34ma\u{1b}[0m\n[cancelled] [exit code: 130]");
        let content = view
            .console()
            .strip_prefix("```console\n")
            .and_then(|rest| rest.strip_suffix("\n```"))
            .expect("a console fence");
        let (output, status) = parse_result(content).expect("a status line");
        assert_eq!(output, "a\n");
        assert_eq!(
            status,
            RunStatus {
                cancelled: true,
                ..RunStatus::exited(130)
            }
        );
    }
}
