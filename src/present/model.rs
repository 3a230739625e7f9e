//! The result text a language model gets back from the bash tool.
//!
//! Owns [`model_result`]: the output as plain text (escape sequences stripped, `\r` redraws
//! collapsed to what was drawn last), cut to a per-call budget in the middle, then the status
//! markers (`tool::markers`). Pure. Must not touch: running commands, ACP.

use super::ansi;
use crate::exec::RunOutcome;
use crate::tool::markers::render_result;

/// The default budget of [`model_result`]: 16 KiB of output.
pub const DEFAULT_MODEL_BUDGET: usize = 16 * 1024;

/// What the model reads for a finished run: the plain output, at most `budget` bytes of it (its
/// start and its end, with a line saying how much was left out between), then the status line.
pub fn model_result(outcome: &RunOutcome, budget: usize) -> String {
    let plain = ansi::to_plain_text(&outcome.output);
    render_result(&within_budget(&plain, budget), &outcome.status)
}

/// What the model reads for a finished bash call: [`model_result`], then the line that says
/// what the command changed in the session folder ([`crate::tool::BashResult::changed`]).
pub fn model_text(result: &crate::tool::BashResult, budget: usize) -> String {
    let mut text = model_result(&result.outcome, budget);
    if let Some(changed) = &result.changed {
        text.push('\n');
        text.push_str(changed);
    }
    text
}

/// `text` whole when it fits in `budget` bytes, else its first and last `budget / 2` bytes (cut
/// at character boundaries) around a line that says how many bytes were left out.
fn within_budget(text: &str, budget: usize) -> String {
    if text.len() <= budget {
        return text.to_string();
    }
    let head = crate::text::floor_boundary(text, budget / 2);
    let tail = crate::text::ceil_boundary(text, text.len() - (budget - budget / 2));
    let omitted = tail - head;
    let mut cut = String::with_capacity(budget + 64);
    cut.push_str(&text[..head]);
    if !cut.is_empty() && !cut.ends_with('\n') {
        cut.push('\n');
    }
    cut.push_str(&format!("[… {omitted} bytes of output left out …]\n"));
    cut.push_str(&text[tail..]);
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::RunStatus;
    use crate::tool::markers::parse_result;

    fn outcome(output: &str, code: i32) -> RunOutcome {
        serde_json::from_value(serde_json::json!({
            "output": output,
            "status": serde_json::to_value(RunStatus::exited(code)).unwrap(),
            "cwd": "/w", "next_cwd": "/w", "notices": [],
            "duration": {"secs": 0, "nanos": 0}
        }))
        .unwrap()
    }

    #[test]
    fn escapes_and_redraws_are_gone_and_the_markers_follow() {
        let text = model_result(
            &outcome("\u{1b}[32mok\u{1b}[0m\n10%\r55%\r100%\n", 2),
            DEFAULT_MODEL_BUDGET,
        );
        assert_eq!(text, "ok\n100%\n[exit code: 2]");
    }

    #[test]
    fn long_output_keeps_its_ends_within_the_budget() {
        let output: String = (0..1000).map(|n| format!("line {n}\n")).collect();
        let text = model_result(&outcome(&output, 0), 100);
        let (kept, status) = parse_result(&text).unwrap();
        assert_eq!(status, RunStatus::exited(0));
        assert!(kept.starts_with("line 0\nline 1\n"), "{kept}");
        assert!(kept.ends_with("line 999\n"), "{kept}");
        assert!(kept.contains("bytes of output left out"), "{kept}");
        assert!(kept.len() < 100 + 64, "{}", kept.len());
    }

    #[test]
    fn the_budget_never_cuts_a_character() {
        let output = "é".repeat(100);
        let text = within_budget(&output, 51);
        assert!(text.starts_with(&"é".repeat(12)), "{text}");
        assert!(text.ends_with(&"é".repeat(12)), "{text}");
    }
}
