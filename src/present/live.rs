//! The live console view: what a client without a terminal card shows while a command runs.
//!
//! Owns [`OutputTail`] (the end of the output so far, in bounded memory whatever the command
//! prints) and [`OutputTail::console`] (its last lines as a ```` ```console ```` block, after the
//! script's `$ ` lines). Pure: no clock and no I/O; when to show it is
//! [`crate::acp::stream`]'s job. Must not touch: the final result (that is [`super::present_result`],
//! with the head and tail and the status markers), ACP.

use super::{ansi, console_block};

/// How much of the output the live view shows: [`LiveBounds::new`], or the default (20 lines,
/// 3 KiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LiveBounds {
    /// The most output lines shown (20: with ten script lines, the block fits in the 28 lines
    /// that acpx shows of a block).
    pub max_lines: usize,
    /// The most bytes of output shown (3 KiB).
    pub max_bytes: usize,
}

impl LiveBounds {
    /// At most `max_lines` lines and `max_bytes` bytes of output.
    pub fn new(max_lines: usize, max_bytes: usize) -> Self {
        LiveBounds {
            max_lines,
            max_bytes,
        }
    }
}

impl Default for LiveBounds {
    fn default() -> Self {
        LiveBounds {
            max_lines: 20,
            max_bytes: 3 * 1024,
        }
    }
}

/// The end of a command's output so far, as printed (escape sequences intact).
///
/// Keeps between `keep` and `2 × keep` bytes (cut at the start of a line when there is one), so a
/// command that prints gigabytes costs a few KiB here; counts the lines it let go.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OutputTail {
    raw: String,
    keep: usize,
    /// Lines (newlines) dropped from the front of `raw`.
    dropped_lines: u64,
}

impl OutputTail {
    /// A tail that keeps at least the last `keep` bytes; `keep` should exceed what is shown.
    pub fn new(keep: usize) -> Self {
        OutputTail {
            raw: String::new(),
            keep: keep.max(1),
            dropped_lines: 0,
        }
    }

    /// A tail sized for `bounds` (four times the bytes shown, so that escape sequences and
    /// progress-bar rewrites do not eat what is shown).
    pub fn for_bounds(bounds: LiveBounds) -> Self {
        OutputTail::new(bounds.max_bytes * 4)
    }

    /// Appends a chunk of output.
    pub fn push(&mut self, chunk: &str) {
        self.raw.push_str(chunk);
        if self.raw.len() > 2 * self.keep {
            let mut start = self.raw.len() - self.keep;
            match self.raw[start..].find('\n') {
                Some(newline) => start += newline + 1,
                None => start = crate::text::ceil_boundary(&self.raw, start),
            }
            self.dropped_lines += self.raw[..start].matches('\n').count() as u64;
            self.raw.drain(..start);
        }
    }

    /// Whether any output came in.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty() && self.dropped_lines == 0
    }

    /// The live view: a console block with `echo` (the script's `$ ` lines, maybe empty), then,
    /// if some output is not shown, a line `… (N earlier lines)`, then the last lines of the
    /// output as plain text, within `bounds`.
    pub fn console(&self, echo: &str, bounds: LiveBounds) -> String {
        let plain = ansi::to_plain_text(&self.raw);
        let lines: Vec<&str> = plain.split_inclusive('\n').collect();
        let mut shown = 0;
        let mut bytes = 0;
        for line in lines.iter().rev() {
            if shown == bounds.max_lines || bytes + line.len() > bounds.max_bytes {
                break;
            }
            shown += 1;
            bytes += line.len();
        }
        let mut text = String::from(echo);
        let earlier = self.dropped_lines + (lines.len() - shown) as u64;
        if shown == 0 && !lines.is_empty() {
            // One line longer than the whole budget: its end, at a character boundary.
            let last = lines[lines.len() - 1];
            text.push_str(&earlier_note(earlier.saturating_sub(1), true));
            text.push_str(crate::text::last_at_boundary(last, bounds.max_bytes));
        } else {
            if earlier > 0 {
                text.push_str(&earlier_note(earlier, false));
            }
            for line in &lines[lines.len() - shown..] {
                text.push_str(line);
            }
        }
        console_block(&text)
    }
}

fn earlier_note(lines: u64, line_cut: bool) -> String {
    let lines_note = match lines {
        0 => String::new(),
        1 => "1 earlier line".to_string(),
        n => format!("{n} earlier lines"),
    };
    match (lines_note.is_empty(), line_cut) {
        (true, true) => "… (the start of this line)\n".to_string(),
        (false, true) => format!("… ({lines_note}, and the start of this line)\n"),
        _ => format!("… ({lines_note})\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(max_lines: usize, max_bytes: usize) -> LiveBounds {
        LiveBounds {
            max_lines,
            max_bytes,
        }
    }

    #[test]
    fn short_output_is_shown_whole_after_the_script() {
        let mut tail = OutputTail::new(1024);
        assert!(tail.is_empty());
        tail.push("one\n");
        tail.push("two\n");
        assert!(!tail.is_empty());
        assert_eq!(
            tail.console("$ a\n$ b\n", LiveBounds::default()),
            "```console\n$ a\n$ b\none\ntwo\n```"
        );
    }

    #[test]
    fn only_the_last_lines_are_shown_with_how_many_came_before() {
        let mut tail = OutputTail::new(1024);
        for n in 1..=40 {
            tail.push(&format!("{n}\n"));
        }
        assert_eq!(
            tail.console("", bounds(3, 1024)),
            "```console\n… (37 earlier lines)\n38\n39\n40\n```"
        );
    }

    #[test]
    fn a_partial_last_line_is_shown() {
        let mut tail = OutputTail::new(1024);
        tail.push("done 1\nworking");
        assert_eq!(
            tail.console("", bounds(1, 1024)),
            "```console\n… (1 earlier line)\nworking\n```"
        );
    }

    #[test]
    fn the_byte_bound_holds_and_escapes_and_progress_rewrites_are_resolved() {
        let mut tail = OutputTail::new(1024);
        tail.push("\u{1b}[32maaaa\u{1b}[0m\nbbbb\n10%\r100%\n");
        // 5 + 5 bytes fit in 10; "aaaa\n" does not.
        assert_eq!(
            tail.console("", bounds(20, 10)),
            "```console\n… (1 earlier line)\nbbbb\n100%\n```"
        );
    }

    #[test]
    fn one_line_longer_than_the_bound_shows_its_end() {
        let mut tail = OutputTail::new(1024);
        tail.push("first\n");
        tail.push(&format!("{}é", "x".repeat(100)));
        assert_eq!(
            tail.console("", bounds(20, 4)),
            "```console\n… (1 earlier line, and the start of this line)\nxxé\n```"
        );
    }

    #[test]
    fn memory_stays_bounded_and_dropped_lines_are_counted() {
        let mut tail = OutputTail::new(100);
        for n in 0..100_000 {
            tail.push(&format!("line {n}\n"));
            assert!(tail.raw.len() <= 200 + 12, "{}", tail.raw.len());
        }
        let console = tail.console("", bounds(2, 1024));
        assert_eq!(
            console,
            "```console\n… (99998 earlier lines)\nline 99998\nline 99999\n```"
        );
    }

    #[test]
    fn a_flood_without_newlines_is_cut_at_character_boundaries() {
        let mut tail = OutputTail::new(10);
        for _ in 0..1000 {
            tail.push("ééé");
        }
        assert!(tail.raw.len() <= 26);
        assert!(tail.console("", bounds(1, 6)).contains("ééé\n```"));
    }
}
