//! The status markers: how a run's [`RunStatus`] is written at the end of the bash tool's result
//! text, and how it is read back.
//!
//! Owns the marker format and both directions of it, in one file, because the presentation layer
//! recovers the exit status by parsing what the tool rendered: [`parse_result`] is the exact
//! inverse of [`render_result`], and the tests pin the round trip. Must not touch: running
//! commands, presentation, ACP. The format and its reasons are recorded in
//! `notes/2026-11-29-status-markers.md`.
//!
//! The format: the LAST line of the result text is the status line; everything before it is the
//! command's output. The status line is space-separated tokens in this fixed order, each
//! optional except the last:
//!
//! ```text
//! [no newline at end of output]
//! [output truncated: N bytes dropped]   or   [output truncated: N bytes dropped, full output: "PATH"]
//!                                        or   [output truncated: N bytes dropped, log holds only the first M bytes: "PATH"]
//! [timed out after D]
//! [cancelled]
//! [exit code: N]   or   [killed by signal: NAME]     (exactly one, always last)
//! ```
//!
//! `echo hi` renders as `hi\n[exit code: 0]`; a run with no output renders as the status line
//! alone. Because only the last line is parsed, output that prints marker-like lines (even a
//! whole fake status line) comes back unchanged.
//!
//! A console block (what plain clients show) writes a truncated run's log path on a line of its
//! own before the status line ([`render_console_result`], read back by [`parse_console_result`]),
//! so the status line stays short for clients that do not wrap:
//!
//! ```text
//! [full output: "PATH"]   or   [full output, first M bytes only: "PATH"]   or   [full output not saved]
//! [output truncated: N bytes dropped] [exit code: N]
//! ```

use std::fmt;
use std::time::Duration;

use crate::exec::{signal_name, signal_number, Exit, RunStatus, Truncation};

const NO_NEWLINE: &str = "[no newline at end of output]";
const TRUNCATED: &str = "[output truncated: ";
const BYTES_DROPPED: &str = " bytes dropped";
const FULL_OUTPUT: &str = ", full output: ";
const LOG_HOLDS_FIRST: &str = ", log holds only the first ";
const LOG_BYTES: &str = " bytes: ";
const LOG_LINE: &str = "[full output: ";
const LOG_LINE_FIRST: &str = "[full output, first ";
const LOG_LINE_BYTES: &str = " bytes only: ";
const LOG_NOT_SAVED: &str = "[full output not saved]";
const TIMED_OUT: &str = "[timed out after ";
const CANCELLED: &str = "[cancelled]";
const EXIT_CODE: &str = "[exit code: ";
const KILLED_BY: &str = "[killed by signal: ";

/// The result text of a run: `output`, then the status line.
///
/// Output that does not end with a newline gets one, plus the `[no newline at end of output]`
/// token so the parser can take it away again. Timeouts are written to the millisecond: a
/// sub-millisecond part of `timed_out_after` is dropped (the engine never produces one).
pub fn render_result(output: &str, status: &RunStatus) -> String {
    let mut text = String::with_capacity(output.len() + 64);
    text.push_str(output);
    let no_newline = !output.is_empty() && !output.ends_with('\n');
    if no_newline {
        text.push('\n');
    }
    text.push_str(&status_line(no_newline, status));
    text
}

/// The result text as a reader's console block shows it: [`render_result`], except that where
/// the full output is (the log's path, which can be long) stands on a line of its own before
/// the status line, so that a client that does not wrap long lines still shows how the run
/// ended and where its full output is. The status line keeps `[output truncated: N bytes
/// dropped]` without the path; the line before it is then always the log line:
///
/// ```text
/// [full output: "PATH"]   or   [full output, first M bytes only: "PATH"]   or   [full output not saved]
/// ```
///
/// [`parse_console_result`] is its exact inverse. The last line is also a status line
/// [`parse_result`] reads (the truncation without its path).
pub fn render_console_result(output: &str, status: &RunStatus) -> String {
    let Some(truncation) = &status.truncation else {
        return render_result(output, status);
    };
    let mut text = String::with_capacity(output.len() + 128);
    text.push_str(output);
    let no_newline = !output.is_empty() && !output.ends_with('\n');
    if no_newline {
        text.push('\n');
    }
    text.push_str(&log_line(truncation));
    text.push('\n');
    let short = RunStatus {
        truncation: Some(Truncation {
            dropped_bytes: truncation.dropped_bytes,
            full_output: None,
            log_holds_first: None,
        }),
        ..status.clone()
    };
    text.push_str(&status_line(no_newline, &short));
    text
}

/// Splits a console block's content into the output and the status, undoing
/// [`render_console_result`]: accepts exactly the texts it writes.
pub fn parse_console_result(text: &str) -> Result<(String, RunStatus), MarkerError> {
    let (before, line) = split_last_line(text);
    let (no_newline, mut status) = parse_status_line(line)?;
    let Some(truncation) = &mut status.truncation else {
        return Ok((output_before(before, no_newline, line)?.to_string(), status));
    };
    if truncation.full_output.is_some() {
        return Err(MarkerError::new(
            line,
            "in a console block the log's path stands on the line before the status line, \
             not in the [output truncated: …] token",
        ));
    }
    let Some(before_log) = before.strip_suffix('\n') else {
        return Err(MarkerError::new(
            line,
            "it says [output truncated: …], but no [full output: …] line comes before it",
        ));
    };
    let (before, log) = split_last_line(before_log);
    let (full_output, log_holds_first) =
        parse_log_line(log).map_err(|problem| MarkerError::new(log, problem))?;
    truncation.full_output = full_output;
    truncation.log_holds_first = log_holds_first;
    Ok((output_before(before, no_newline, line)?.to_string(), status))
}

/// The console block's log line for `truncation`.
fn log_line(truncation: &Truncation) -> String {
    match (&truncation.full_output, truncation.log_holds_first) {
        (Some(path), None) => format!("{LOG_LINE}{}]", json_string(path)),
        (Some(path), Some(bytes)) => {
            format!(
                "{LOG_LINE_FIRST}{bytes}{LOG_LINE_BYTES}{}]",
                json_string(path)
            )
        }
        (None, _) => LOG_NOT_SAVED.to_string(),
    }
}

/// The inverse of [`log_line`]: the path and how much of the output the log holds.
fn parse_log_line(line: &str) -> Result<(Option<String>, Option<u64>), String> {
    if line == LOG_NOT_SAVED {
        return Ok((None, None));
    }
    let (quoted, first) = if let Some(quoted) = line.strip_prefix(LOG_LINE) {
        (quoted, None)
    } else if let Some(capped) = line.strip_prefix(LOG_LINE_FIRST) {
        let (count, quoted) = capped.split_once(LOG_LINE_BYTES).ok_or_else(|| {
            "the log line's size is not followed by ` bytes only: \"PATH\"`".to_string()
        })?;
        let bytes = parse_canonical_int(count).ok_or_else(|| {
            format!("the log's byte count {count:?} is not a plain decimal number")
        })?;
        (quoted, Some(bytes))
    } else {
        return Err(format!(
            "the line before a status line with [output truncated: …] must be \
             `{LOG_LINE}\"PATH\"]`, `{LOG_LINE_FIRST}M{LOG_LINE_BYTES}\"PATH\"]` or `{LOG_NOT_SAVED}`"
        ));
    };
    let (path, rest) = parse_path(quoted)?;
    if rest != "]" {
        return Err("the log line does not end right after the path with `]`".to_string());
    }
    Ok((Some(path), first))
}

/// `text` up to its last line (with the newline) and the last line.
fn split_last_line(text: &str) -> (&str, &str) {
    match text.rfind('\n') {
        Some(newline) => (&text[..=newline], &text[newline + 1..]),
        None => ("", text),
    }
}

/// The output in `before` (everything before the status line, or the log line): without the
/// newline the renderer added when the status says `[no newline at end of output]`.
fn output_before<'a>(
    before: &'a str,
    no_newline: bool,
    line: &str,
) -> Result<&'a str, MarkerError> {
    if !no_newline {
        return Ok(before);
    }
    match before.strip_suffix('\n') {
        Some(output) if !output.is_empty() && !output.ends_with('\n') => Ok(output),
        _ => Err(MarkerError::new(
            line,
            "it says [no newline at end of output], but the output before it is empty \
             or already ends with a newline",
        )),
    }
}

/// Splits a result text into the command's output and its status, undoing [`render_result`].
///
/// Accepts exactly the texts [`render_result`] produces: a status line it would not have
/// written (tokens out of order, `07` for `7`, an unknown signal name, …) is an error that says
/// which part is wrong.
pub fn parse_result(text: &str) -> Result<(String, RunStatus), MarkerError> {
    let (before, line) = split_last_line(text);
    let (no_newline, status) = parse_status_line(line)?;
    Ok((output_before(before, no_newline, line)?.to_string(), status))
}

/// Why a text is not a result text: which line was read as the status line and what is wrong
/// with it. Made by [`parse_result`]; callers only read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MarkerError {
    /// The last line of the text, where the status line should be.
    pub last_line: String,
    /// What is wrong with it.
    pub problem: String,
}

impl MarkerError {
    fn new(line: &str, problem: impl Into<String>) -> Self {
        MarkerError {
            last_line: line.to_string(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for MarkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 200;
        let line = &self.last_line;
        let shown = match line.char_indices().nth(SHOWN) {
            Some((cut, _)) => format!("{:?}… ({} bytes)", &line[..cut], line.len()),
            None => format!("{line:?}"),
        };
        write!(
            f,
            "the last line is not a status line: {}: {shown} (a result text ends with a line \
             like `[exit code: 0]` or `[killed by signal: SIGKILL]`, written by render_result)",
            self.problem
        )
    }
}

impl std::error::Error for MarkerError {}

/// The status line alone (no newline), as [`render_result`] writes it.
fn status_line(no_newline: bool, status: &RunStatus) -> String {
    let mut tokens: Vec<String> = Vec::with_capacity(5);
    if no_newline {
        tokens.push(NO_NEWLINE.to_string());
    }
    if let Some(truncation) = &status.truncation {
        let mut token = format!("{TRUNCATED}{}{BYTES_DROPPED}", truncation.dropped_bytes);
        if let Some(path) = &truncation.full_output {
            match truncation.log_holds_first {
                Some(bytes) => token.push_str(&format!("{LOG_HOLDS_FIRST}{bytes}{LOG_BYTES}")),
                None => token.push_str(FULL_OUTPUT),
            }
            token.push_str(&json_string(path));
        }
        token.push(']');
        tokens.push(token);
    }
    if let Some(after) = status.timed_out_after {
        tokens.push(format!("{TIMED_OUT}{}]", render_duration(after)));
    }
    if status.cancelled {
        tokens.push(CANCELLED.to_string());
    }
    tokens.push(match status.exit {
        Exit::Code(code) => format!("{EXIT_CODE}{code}]"),
        Exit::Signal(signal) => format!("{KILLED_BY}{}]", signal_name(signal)),
    });
    tokens.join(" ")
}

/// `text` as a JSON string literal: any UTF-8 text on one line, quotes and all.
fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// `5s`, `2.5s`, `0.125s`: whole seconds, then up to three decimals with trailing zeros trimmed.
fn render_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    let millis = duration.subsec_millis();
    if millis == 0 {
        format!("{secs}s")
    } else {
        let decimals = format!("{millis:03}");
        format!("{secs}.{}s", decimals.trim_end_matches('0'))
    }
}

fn parse_status_line(line: &str) -> Result<(bool, RunStatus), MarkerError> {
    let error = |problem: String| MarkerError::new(line, problem);
    if !line.ends_with(']') || !(line.contains(EXIT_CODE) || line.contains(KILLED_BY)) {
        return Err(error(
            "it does not end with [exit code: N] or [killed by signal: NAME]".to_string(),
        ));
    }

    let mut rest = line;
    let no_newline = take_token(&mut rest, NO_NEWLINE);

    let truncation = if let Some(after) = rest.strip_prefix(TRUNCATED) {
        let (truncation, remaining) = parse_truncation(after).map_err(error)?;
        rest = remaining;
        expect_separator(&mut rest).map_err(error)?;
        Some(truncation)
    } else {
        None
    };

    let timed_out_after = if let Some(after) = rest.strip_prefix(TIMED_OUT) {
        let (value, remaining) = after
            .split_once(']')
            .ok_or_else(|| error("the [timed out after D] token is not closed".to_string()))?;
        let duration = parse_duration(value).map_err(error)?;
        rest = remaining;
        expect_separator(&mut rest).map_err(error)?;
        Some(duration)
    } else {
        None
    };

    let cancelled = take_token(&mut rest, CANCELLED);

    let exit = if let Some(value) = rest.strip_prefix(EXIT_CODE).and_then(closed) {
        Exit::Code(parse_canonical_int(value).ok_or_else(|| {
            error(format!(
                "the exit code {value:?} is not a whole number in plain decimal"
            ))
        })?)
    } else if let Some(name) = rest.strip_prefix(KILLED_BY).and_then(closed) {
        Exit::Signal(signal_number(name).ok_or_else(|| {
            error(format!(
                "{name:?} is not a signal name (expected e.g. SIGKILL or SIG99)"
            ))
        })?)
    } else {
        let found = rest.split_inclusive(']').next().unwrap_or(rest);
        return Err(error(format!(
            "expected the exit marker here but found {found:?}; tokens must come in the order \
             [no newline at end of output] [output truncated: …] [timed out after D] \
             [cancelled] [exit code: N]|[killed by signal: NAME], each at most once"
        )));
    };

    Ok((
        no_newline,
        RunStatus {
            exit,
            timed_out_after,
            cancelled,
            truncation,
        },
    ))
}

/// Consumes `token` and the space after it when `rest` starts with them.
fn take_token(rest: &mut &str, token: &str) -> bool {
    match rest
        .strip_prefix(token)
        .and_then(|after| after.strip_prefix(' '))
    {
        Some(after) => {
            *rest = after;
            true
        }
        None => false,
    }
}

fn expect_separator(rest: &mut &str) -> Result<(), String> {
    match rest.strip_prefix(' ') {
        Some(after) => {
            *rest = after;
            Ok(())
        }
        None => Err("a token is not followed by a space and the exit marker".to_string()),
    }
}

/// The inside of the final token: `value` when `rest` is exactly `value]`.
fn closed(rest: &str) -> Option<&str> {
    rest.strip_suffix(']').filter(|value| !value.contains(']'))
}

/// After `[output truncated: `: `N bytes dropped]` or `N bytes dropped, full output: "PATH"]`.
fn parse_truncation(after: &str) -> Result<(Truncation, &str), String> {
    let (count, rest) = after.split_once(BYTES_DROPPED).ok_or_else(|| {
        "the [output truncated: …] token does not say `N bytes dropped`".to_string()
    })?;
    let dropped_bytes = parse_canonical_int(count)
        .ok_or_else(|| format!("the dropped byte count {count:?} is not a plain decimal number"))?;
    if let Some(rest) = rest.strip_prefix(']') {
        return Ok((
            Truncation {
                dropped_bytes,
                full_output: None,
                log_holds_first: None,
            },
            rest,
        ));
    }
    let (quoted, log_holds_first) = if let Some(quoted) = rest.strip_prefix(FULL_OUTPUT) {
        (quoted, None)
    } else if let Some(capped) = rest.strip_prefix(LOG_HOLDS_FIRST) {
        let (count, quoted) = capped
            .split_once(LOG_BYTES)
            .ok_or_else(|| "the log's size is not followed by ` bytes: \"PATH\"`".to_string())?;
        let bytes = parse_canonical_int(count).ok_or_else(|| {
            format!("the log's byte count {count:?} is not a plain decimal number")
        })?;
        (quoted, Some(bytes))
    } else {
        return Err(
            "the [output truncated: …] token goes on with something other than `]`, \
             `, full output: \"PATH\"]` or `, log holds only the first M bytes: \"PATH\"]`"
                .to_string(),
        );
    };
    let (path, rest) = parse_path(quoted)?;
    let rest = rest.strip_prefix(']').ok_or_else(|| {
        "the [output truncated: …] token is not closed after the path".to_string()
    })?;
    Ok((
        Truncation {
            dropped_bytes,
            full_output: Some(path),
            log_holds_first,
        },
        rest,
    ))
}

/// The JSON string literal at the start of `quoted`, written exactly as [`json_string`] writes
/// it, and what follows it.
fn parse_path(quoted: &str) -> Result<(String, &str), String> {
    let mut strings = serde_json::Deserializer::from_str(quoted).into_iter::<String>();
    let path = match strings.next() {
        Some(Ok(path)) => path,
        _ => return Err("the full output path is not a JSON string literal".to_string()),
    };
    let (literal, rest) = quoted.split_at(strings.byte_offset());
    if json_string(&path) != literal {
        return Err(format!(
            "the full output path {literal} is not written the way the renderer writes it"
        ));
    }
    Ok((path, rest))
}

/// The inverse of [`render_duration`]; anything else (`5.0s`, `1.2345s`, `5`) is refused.
fn parse_duration(value: &str) -> Result<Duration, String> {
    let bad = || format!("the timeout {value:?} is not seconds like 5s, 2.5s or 0.125s");
    let number = value.strip_suffix('s').ok_or_else(bad)?;
    let (whole, decimals) = match number.split_once('.') {
        Some((whole, decimals)) => (whole, Some(decimals)),
        None => (number, None),
    };
    let secs: u64 = parse_canonical_int(whole).ok_or_else(bad)?;
    let millis = match decimals {
        None => 0,
        Some(decimals) => {
            let valid = (1..=3).contains(&decimals.len())
                && decimals.bytes().all(|byte| byte.is_ascii_digit())
                && !decimals.ends_with('0');
            if !valid {
                return Err(bad());
            }
            format!("{decimals:0<3}")
                .parse::<u32>()
                .map_err(|_| bad())?
        }
    };
    Ok(Duration::new(secs, millis * 1_000_000))
}

/// An integer written the way `Display` writes it: no `+`, no leading zeros, no `-0`.
fn parse_canonical_int<T: std::str::FromStr + ToString>(text: &str) -> Option<T> {
    let value: T = text.parse().ok()?;
    (value.to_string() == text).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn status(exit: Exit) -> RunStatus {
        RunStatus {
            exit,
            timed_out_after: None,
            cancelled: false,
            truncation: None,
        }
    }

    fn round_trips(output: &str, status: &RunStatus) -> String {
        let text = render_result(output, status);
        assert_eq!(
            parse_result(&text),
            Ok((output.to_string(), status.clone())),
            "rendered as {text:?}"
        );
        text
    }

    fn console_round_trips(output: &str, status: &RunStatus) -> String {
        let text = render_console_result(output, status);
        assert_eq!(
            parse_console_result(&text),
            Ok((output.to_string(), status.clone())),
            "rendered as {text:?}"
        );
        text
    }

    #[test]
    fn a_console_result_puts_the_log_on_its_own_line_before_the_status_line() {
        let status = RunStatus::exited(2).truncated(Truncation::new(7, Some("/l/1.log".into())));
        assert_eq!(
            console_round_trips("head\ntail\n", &status),
            "head\ntail\n[full output: \"/l/1.log\"]\n[output truncated: 7 bytes dropped] [exit code: 2]"
        );
        assert_eq!(
            console_round_trips("", &status),
            "[full output: \"/l/1.log\"]\n[output truncated: 7 bytes dropped] [exit code: 2]"
        );
        assert_eq!(
            console_round_trips("partial", &status),
            "partial\n[full output: \"/l/1.log\"]\n[no newline at end of output] \
             [output truncated: 7 bytes dropped] [exit code: 2]"
        );
        let capped = RunStatus::signalled(9).truncated(Truncation {
            dropped_bytes: 30,
            full_output: Some("/l/2.log".into()),
            log_holds_first: Some(20),
        });
        assert_eq!(
            console_round_trips("", &capped),
            "[full output, first 20 bytes only: \"/l/2.log\"]\n\
             [output truncated: 30 bytes dropped] [killed by signal: SIGKILL]"
        );
        let unsaved = RunStatus::exited(0).truncated(Truncation::new(5, None));
        assert_eq!(
            console_round_trips("x\n", &unsaved),
            "x\n[full output not saved]\n[output truncated: 5 bytes dropped] [exit code: 0]"
        );
        let plain = RunStatus::exited(0);
        assert_eq!(
            console_round_trips("hi\n", &plain),
            render_result("hi\n", &plain)
        );
        // The last line is a status line for the plain parser too (the truncation without its
        // path), so a reader that knows only the status line still reads how the run ended.
        let text = render_console_result("head\n", &status);
        let (_, read) = parse_result(&text).expect("the last line is a status line");
        assert_eq!(read.exit, Exit::Code(2));
        assert_eq!(read.truncation, Some(Truncation::new(7, None)));
    }

    #[test]
    fn a_console_text_the_renderer_would_not_write_is_refused() {
        for (text, complaint) in [
            (
                "[output truncated: 5 bytes dropped, full output: \"/a\"] [exit code: 0]",
                "stands on the line before",
            ),
            (
                "[output truncated: 5 bytes dropped] [exit code: 0]",
                "no [full output: …] line",
            ),
            (
                "out\n[output truncated: 5 bytes dropped] [exit code: 0]",
                "must be",
            ),
            (
                "[full output: /a]\n[output truncated: 5 bytes dropped] [exit code: 0]",
                "JSON",
            ),
            (
                "[full output: \"/a\"] \n[output truncated: 5 bytes dropped] [exit code: 0]",
                "does not end right after",
            ),
            (
                "[full output, first 05 bytes only: \"/a\"]\n[output truncated: 5 bytes dropped] [exit code: 0]",
                "plain decimal",
            ),
            (
                "[full output: \"/a\"]\n[no newline at end of output] [output truncated: 5 bytes dropped] [exit code: 0]",
                "no newline",
            ),
        ] {
            match parse_console_result(text) {
                Ok(parsed) => panic!("{text:?} parsed as {parsed:?}"),
                Err(error) => {
                    let message = error.to_string();
                    assert!(message.contains(complaint), "{text:?}: {message}");
                }
            }
        }
    }

    #[test]
    fn a_successful_echo_ends_with_exit_code_zero() {
        assert_eq!(
            round_trips("hi\n", &RunStatus::exited(0)),
            "hi\n[exit code: 0]"
        );
    }

    #[test]
    fn empty_output_is_the_status_line_alone() {
        assert_eq!(round_trips("", &RunStatus::exited(3)), "[exit code: 3]");
    }

    #[test]
    fn output_without_a_final_newline_says_so() {
        assert_eq!(
            round_trips("hi", &RunStatus::exited(0)),
            "hi\n[no newline at end of output] [exit code: 0]"
        );
    }

    #[test]
    fn negative_exit_codes_are_written_as_is() {
        assert_eq!(round_trips("", &RunStatus::exited(-1)), "[exit code: -1]");
    }

    #[test]
    fn a_signal_is_written_by_name() {
        assert_eq!(
            round_trips("", &status(Exit::Signal(9))),
            "[killed by signal: SIGKILL]"
        );
        assert_eq!(
            round_trips("", &status(Exit::Signal(15))),
            "[killed by signal: SIGTERM]"
        );
    }

    #[test]
    fn a_timeout_is_written_in_seconds_with_trimmed_decimals() {
        for (millis, written) in [
            (5_000, "5s"),
            (2_500, "2.5s"),
            (125, "0.125s"),
            (100, "0.1s"),
            (1_010, "1.01s"),
            (0, "0s"),
        ] {
            let timed_out = RunStatus {
                timed_out_after: Some(Duration::from_millis(millis)),
                ..status(Exit::Signal(9))
            };
            assert_eq!(
                round_trips("", &timed_out),
                format!("[timed out after {written}] [killed by signal: SIGKILL]")
            );
        }
    }

    #[test]
    fn a_cancelled_run_says_so_before_its_exit() {
        let cancelled = RunStatus {
            cancelled: true,
            ..status(Exit::Signal(15))
        };
        assert_eq!(
            round_trips("", &cancelled),
            "[cancelled] [killed by signal: SIGTERM]"
        );
    }

    #[test]
    fn truncation_says_how_much_was_dropped_and_where_the_rest_is() {
        let truncated = RunStatus {
            truncation: Some(Truncation {
                dropped_bytes: 1234,
                full_output: None,
                log_holds_first: None,
            }),
            ..RunStatus::exited(0)
        };
        assert_eq!(
            round_trips("head\ntail\n", &truncated),
            "head\ntail\n[output truncated: 1234 bytes dropped] [exit code: 0]"
        );
        let with_path = RunStatus {
            truncation: Some(Truncation {
                dropped_bytes: 7,
                full_output: Some("/tmp/logs/run \"1\"].log".to_string()),
                log_holds_first: None,
            }),
            ..RunStatus::exited(0)
        };
        assert_eq!(
            round_trips("", &with_path),
            r#"[output truncated: 7 bytes dropped, full output: "/tmp/logs/run \"1\"].log"] [exit code: 0]"#
        );
        let capped_log = RunStatus {
            truncation: Some(Truncation {
                dropped_bytes: 1_610_547_200,
                full_output: Some("/tmp/run.log".to_string()),
                log_holds_first: Some(268_435_456),
            }),
            ..RunStatus::exited(0)
        };
        assert_eq!(
            round_trips("", &capped_log),
            r#"[output truncated: 1610547200 bytes dropped, log holds only the first 268435456 bytes: "/tmp/run.log"] [exit code: 0]"#
        );
    }

    #[test]
    fn every_token_at_once_comes_in_the_fixed_order() {
        let everything = RunStatus {
            exit: Exit::Signal(9),
            timed_out_after: Some(Duration::from_millis(30_000)),
            cancelled: true,
            truncation: Some(Truncation {
                dropped_bytes: 10,
                full_output: Some("/l.log".to_string()),
                log_holds_first: None,
            }),
        };
        assert_eq!(
            round_trips("partial", &everything),
            "partial\n[no newline at end of output] [output truncated: 10 bytes dropped, full \
             output: \"/l.log\"] [timed out after 30s] [cancelled] [killed by signal: SIGKILL]"
        );
    }

    #[test]
    fn output_that_prints_a_fake_status_line_round_trips() {
        let output = "[exit code: 0]\n[cancelled] [killed by signal: SIGKILL]\n";
        assert_eq!(
            round_trips(output, &RunStatus::exited(1)),
            "[exit code: 0]\n[cancelled] [killed by signal: SIGKILL]\n[exit code: 1]"
        );
        let (parsed, status) =
            parse_result(&render_result("[exit code: 0]", &RunStatus::exited(2)))
                .expect("a fake status line without newline round-trips");
        assert_eq!(
            (parsed.as_str(), status.exit),
            ("[exit code: 0]", Exit::Code(2))
        );
    }

    #[test]
    fn crlf_output_round_trips() {
        round_trips("a\r\nb\r\n", &RunStatus::exited(0));
        round_trips("a\r\nb\r", &RunStatus::exited(0));
    }

    fn parse_error(text: &str) -> String {
        match parse_result(text) {
            Ok(parsed) => panic!("{text:?} parsed as {parsed:?}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn text_without_a_status_line_is_refused_with_the_line_it_read() {
        let message = parse_error("hello\nworld");
        assert!(
            message.starts_with("the last line is not a status line"),
            "{message}"
        );
        assert!(message.contains("\"world\""), "{message}");
        assert!(parse_error("").contains("does not end with [exit code: N]"));
        assert!(parse_error("hi\n").contains("does not end with [exit code: N]"));
    }

    #[test]
    fn a_status_line_the_renderer_would_not_write_is_refused() {
        for (text, complaint) in [
            ("[exit code: 07]", "not a whole number"),
            ("[exit code: +7]", "not a whole number"),
            ("[exit code: -0]", "not a whole number"),
            ("[exit code: 99999999999]", "not a whole number"),
            ("[exit code: ]", "not a whole number"),
            ("[killed by signal: KILL]", "not a signal name"),
            ("[killed by signal: SIG009]", "not a signal name"),
            (
                "[cancelled] [timed out after 5s] [exit code: 1]",
                "expected the exit marker",
            ),
            (
                "[cancelled] [cancelled] [exit code: 1]",
                "expected the exit marker",
            ),
            ("[exit code: 0] [exit code: 0]", "expected the exit marker"),
            ("[cancelled][exit code: 1]", "expected the exit marker"),
            ("[timed out after 5.0s] [exit code: 1]", "not seconds"),
            ("[timed out after 1.2345s] [exit code: 1]", "not seconds"),
            ("[timed out after 5] [exit code: 1]", "not seconds"),
            (
                "[timed out after 5s][exit code: 1]",
                "not followed by a space",
            ),
            (
                "[output truncated: 5 bytes] [exit code: 0]",
                "bytes dropped",
            ),
            (
                "[output truncated: 05 bytes dropped] [exit code: 0]",
                "plain decimal",
            ),
            (
                "[output truncated: 5 bytes dropped, full output: /x] [exit code: 0]",
                "JSON",
            ),
            (
                "[output truncated: 5 bytes dropped, full output: \"\\u0041\"] [exit code: 0]",
                "the way the renderer writes it",
            ),
            (" [exit code: 0]", "expected the exit marker"),
            ("[exit code: 0] ", "does not end with"),
            ("[no newline at end of output] [exit code: 0]", "no newline"),
            (
                "a\n\n[no newline at end of output] [exit code: 0]",
                "no newline",
            ),
        ] {
            let message = parse_error(text);
            assert!(message.contains(complaint), "{text:?}: {message}");
        }
    }

    #[test]
    fn a_huge_garbage_line_is_shortened_in_the_message() {
        let message = parse_error(&"x".repeat(10_000));
        assert!(message.len() < 600, "{message}");
        assert!(message.contains("(10000 bytes)"), "{message}");
    }

    /// Lines that look like markers, so that generated outputs probe the parser's confusion.
    fn marker_like_line() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("[exit code: 0]".to_string()),
            Just("[killed by signal: SIGKILL]".to_string()),
            Just("[no newline at end of output] [exit code: 1]".to_string()),
            Just("[cancelled]".to_string()),
            Just("[timed out after 5s] [cancelled] [exit code: 124]".to_string()),
            Just("[output truncated: 3 bytes dropped, full output: \"/a\"]".to_string()),
            Just(
                "[output truncated: 3 bytes dropped, log holds only the first 2 bytes: \"/a\"]"
                    .to_string()
            ),
            Just("".to_string()),
            Just("\r".to_string()),
            "[a-z \\[\\]:0-9]{0,20}",
            "\\PC{0,12}",
        ]
    }

    fn output() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "(\\PC|\r|\n|\t|\u{1b}){0,40}",
            prop::collection::vec((marker_like_line(), "\n|\r\n"), 0..6).prop_map(|lines| {
                lines
                    .into_iter()
                    .map(|(line, end)| line + &end)
                    .collect::<String>()
            }),
            (prop::collection::vec(marker_like_line(), 1..6)).prop_map(|lines| lines.join("\n")),
        ]
    }

    fn exit() -> impl Strategy<Value = Exit> {
        prop_oneof![
            any::<i32>().prop_map(Exit::Code),
            (0..=255i32).prop_map(Exit::Code),
            (1..=64i32).prop_map(Exit::Signal),
            any::<i32>().prop_map(Exit::Signal),
        ]
    }

    fn run_status() -> impl Strategy<Value = RunStatus> {
        (
            exit(),
            prop::option::of(any::<u64>().prop_map(Duration::from_millis)),
            any::<bool>(),
            prop::option::of((
                any::<u64>(),
                prop::option::of((any::<String>(), prop::option::of(any::<u64>()))),
            )),
        )
            .prop_map(|(exit, timed_out_after, cancelled, truncation)| RunStatus {
                exit,
                timed_out_after,
                cancelled,
                truncation: truncation.map(|(dropped_bytes, log)| Truncation {
                    dropped_bytes,
                    log_holds_first: log.as_ref().and_then(|(_, first)| *first),
                    full_output: log.map(|(path, _)| path),
                }),
            })
    }

    /// Result texts in the documented format, built token by token from literals: the output
    /// (empty, ending with a newline, or not, which adds the no-newline token), then the
    /// optional tokens in their fixed order, then exactly one exit token.
    fn canonical_result_text() -> impl Strategy<Value = String> {
        let output = prop_oneof![
            Just(String::new()),
            "[a-z \\[\\]]{0,10}\n",
            "[a-z ]{0,5}\n[a-z]{1,5}",
        ];
        let truncated = prop::option::of((
            any::<u64>(),
            prop::option::of(prop::sample::select(vec![
                "/tmp/a.log",
                "/l/run 1.log",
                "é",
            ])),
        ));
        let timeout = prop::option::of(prop::sample::select(vec![
            "5s", "0.25s", "2.5s", "1.001s", "600s", "0.1s", "3.12s",
        ]));
        let exit = prop_oneof![
            any::<i32>().prop_map(|code| format!("[exit code: {code}]")),
            prop::sample::select(vec![
                "SIGTERM",
                "SIGKILL",
                "SIGINT",
                "SIGHUP",
                "SIGSEGV",
                "SIGPIPE",
                "SIGRTMIN+3",
            ])
            .prop_map(|name| format!("[killed by signal: {name}]")),
        ];
        (output, truncated, timeout, any::<bool>(), exit).prop_map(
            |(output, truncated, timeout, cancelled, exit)| {
                let mut tokens = Vec::new();
                let mut text = output.clone();
                if !output.is_empty() && !output.ends_with('\n') {
                    text.push('\n');
                    tokens.push("[no newline at end of output]".to_string());
                }
                if let Some((bytes, path)) = truncated {
                    tokens.push(match path {
                        Some(path) => format!(
                            "[output truncated: {bytes} bytes dropped, full output: \"{path}\"]"
                        ),
                        None => format!("[output truncated: {bytes} bytes dropped]"),
                    });
                }
                if let Some(after) = timeout {
                    tokens.push(format!("[timed out after {after}]"));
                }
                if cancelled {
                    tokens.push("[cancelled]".to_string());
                }
                tokens.push(exit);
                text + &tokens.join(" ")
            },
        )
    }

    /// Texts built from valid and almost-valid tokens, output shapes and separators.
    fn near_result_text() -> impl Strategy<Value = String> {
        let before = prop::sample::select(vec!["", "a\n", "a", "a\n\n", "\n", "[exit code: 0]\n"]);
        let token = prop::sample::select(vec![
            NO_NEWLINE,
            "[output truncated: 5 bytes dropped]",
            "[output truncated: 5 bytes dropped, full output: \"/a b\"]",
            "[output truncated: 5 bytes dropped, full output: \"\\u00e9\"]",
            "[timed out after 2.5s]",
            "[timed out after 2.50s]",
            "[timed out after 02s]",
            "[cancelled]",
            "[exit code: 0]",
            "[exit code: 00]",
            "[exit code: -12]",
            "[killed by signal: SIGKILL]",
            "[killed by signal: SIG34]",
            "[killed by signal: SIGRTMIN+0]",
        ]);
        let separator = prop::sample::select(vec![" ", " ", " ", "", "  "]);
        (before, prop::collection::vec((token, separator), 1..6)).prop_map(|(before, tokens)| {
            let mut text = before.to_string();
            for (index, (token, separator)) in tokens.iter().enumerate() {
                if index > 0 {
                    text.push_str(separator);
                }
                text.push_str(token);
            }
            text
        })
    }

    /// Console texts built from valid and almost-valid log lines and status lines.
    fn near_console_text() -> impl Strategy<Value = String> {
        let before = prop::sample::select(vec!["", "a\n", "a", "a\n\n", "\n", "[exit code: 0]\n"]);
        let log = prop::sample::select(vec![
            "",
            "[full output: \"/a b\"]\n",
            "[full output: \"/a b\"] \n",
            "[full output: \"\\u00e9\"]\n",
            "[full output, first 3 bytes only: \"/a\"]\n",
            "[full output, first 03 bytes only: \"/a\"]\n",
            "[full output not saved]\n",
            "[full output not saved] \n",
            "[output truncated: 5 bytes dropped]\n",
        ]);
        let status = prop::sample::select(vec![
            "[exit code: 0]",
            "[no newline at end of output] [exit code: 0]",
            "[output truncated: 5 bytes dropped] [exit code: 1]",
            "[no newline at end of output] [output truncated: 5 bytes dropped] [cancelled] [exit code: 1]",
            "[output truncated: 5 bytes dropped, full output: \"/a\"] [exit code: 1]",
            "[output truncated: 5 bytes dropped] [timed out after 2.5s] [killed by signal: SIGKILL]",
        ]);
        (before, log, status).prop_map(|(before, log, status)| format!("{before}{log}{status}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn parse_undoes_render(output in output(), status in run_status()) {
            let text = render_result(&output, &status);
            prop_assert_eq!(parse_result(&text), Ok((output, status)), "rendered as {:?}", text);
        }

        /// Texts written from the format's description (not by `render_result`): every one
        /// must parse (a parse error fails the test) and render back byte for byte.
        #[test]
        fn every_canonical_text_parses_and_renders_back(text in canonical_result_text()) {
            let parsed = parse_result(&text);
            prop_assert!(parsed.is_ok(), "{:?} does not parse: {:?}", text, parsed);
            let (output, status) = parsed.unwrap();
            prop_assert_eq!(render_result(&output, &status), text);
        }

        #[test]
        fn render_undoes_parse(text in near_result_text()) {
            // Whatever the parser accepts is exactly what the renderer writes.
            if let Ok((output, status)) = parse_result(&text) {
                prop_assert_eq!(render_result(&output, &status), text);
            }
        }

        #[test]
        fn parse_console_undoes_render_console(output in output(), status in run_status()) {
            let text = render_console_result(&output, &status);
            prop_assert_eq!(
                parse_console_result(&text),
                Ok((output, status.clone())),
                "rendered as {:?}",
                text
            );
            // The status line stands alone and never holds the log's path: it stays short
            // whatever the path, and the plain parser reads the same exit from it.
            let last = text.rsplit('\n').next().unwrap_or_default();
            prop_assert!(last.len() <= 200, "{:?}", last);
            let (_, read) = parse_result(&text).expect("the last line is a status line");
            prop_assert_eq!(read.exit, status.exit);
            prop_assert_eq!(read.truncation.map(|t| t.dropped_bytes),
                status.truncation.map(|t| t.dropped_bytes));
        }

        #[test]
        fn render_console_undoes_parse_console(text in near_console_text()) {
            if let Ok((output, status)) = parse_console_result(&text) {
                prop_assert_eq!(render_console_result(&output, &status), text);
            }
        }

        #[test]
        fn the_status_line_is_always_one_line(output in output(), status in run_status()) {
            let text = render_result(&output, &status);
            let last = text.rsplit('\n').next().unwrap_or_default();
            prop_assert!(text.len() - last.len() >= output.len());
            prop_assert!(last.ends_with(']'));
        }
    }
}
