//! How a script is shown back to the user: as a title, as an echoed input, and as `$ ` lines in a
//! console block.
//!
//! Owns the cuts that keep what is echoed short, whatever the script's size (a 210 MB script is
//! run whole, but never echoed whole): [`cut`] for text that may span lines (a card's title, the
//! `rawInput`), [`one_line_title`] for clients that show a title on one line, and [`echo_lines`]
//! for the script at the top of a console block. Pure functions over strings. Must not touch:
//! the script that runs (the caller keeps it whole), ACP.

/// The most bytes of a script a title or an echoed input carries (4 KiB: some 100 lines of a
/// script, more than any card shows without scrolling).
pub const MAX_ECHO_BYTES: usize = 4096;

/// The most characters of one line in a one-line title or an echoed `$ ` line.
pub const MAX_LINE_CHARS: usize = 160;

/// How many lines of a multi-line script a console block echoes, the "more lines" line included.
pub const MAX_ECHO_LINES: usize = 10;

/// `text` cut to at most `max_bytes` (at a character boundary, and at the end of a line when one
/// ends in the last quarter), followed by how much was left out: `… (N more bytes)`, on a line of
/// its own when the kept part has several lines. Text that fits is returned as is.
pub fn cut(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_string();
    }
    let mut end = crate::text::floor_boundary(text, max_bytes);
    if let Some(newline) = text[..end].rfind('\n') {
        if newline >= end - end / 4 {
            end = newline;
        }
    }
    let kept = text[..end].trim_end_matches('\n');
    let separator = if kept.contains('\n') { "\n" } else { " " };
    format!(
        "{kept}{separator}… ({} more bytes)",
        text.len() - kept.len()
    )
}

/// The title of a script for a client that shows titles on one line: a one-line script is its
/// own title; a multi-line script is its first line, then `…` and how many lines follow
/// (`make … (2 more lines)`). Both are cut to [`MAX_LINE_CHARS`].
pub fn one_line_title(script: &str) -> String {
    let mut lines = script.lines();
    let first = cut_line(lines.next().unwrap_or(""));
    match lines.count() {
        0 => first,
        more => format!("{first} … ({})", more_lines(more)),
    }
}

/// A multi-line script as console lines, each after a `$ ` prompt, at most [`MAX_ECHO_LINES`]
/// (the last then says how many more the script has), each line cut to [`MAX_LINE_CHARS`], every
/// line ending with `\n`. Empty for a one-line script: its title already shows it.
pub fn echo_lines(script: &str) -> String {
    let total = script.lines().count();
    if total <= 1 {
        return String::new();
    }
    let shown = if total <= MAX_ECHO_LINES {
        total
    } else {
        MAX_ECHO_LINES - 1
    };
    let mut echo = String::new();
    for line in script.lines().take(shown) {
        echo.push_str("$ ");
        echo.push_str(&cut_line(line));
        echo.push('\n');
    }
    if shown < total {
        echo.push_str(&format!("$ … ({})\n", more_lines(total - shown)));
    }
    echo
}

/// `n more line(s)`.
fn more_lines(n: usize) -> String {
    if n == 1 {
        "1 more line".to_string()
    } else {
        format!("{n} more lines")
    }
}

/// One line cut to [`MAX_LINE_CHARS`] characters, ending with `…` when cut.
fn cut_line(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        None => line.to_string(),
        Some((end, _)) => format!("{}…", &line[..end]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_that_fits_is_not_cut() {
        assert_eq!(cut("echo hi", 7), "echo hi");
        assert_eq!(cut("", 0), "");
    }

    #[test]
    fn a_long_line_is_cut_with_how_much_was_left_out() {
        assert_eq!(cut("abcdefghij", 4), "abcd … (6 more bytes)");
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        // "é" is two bytes: a cut at byte 2 of "aéb" falls inside it.
        assert_eq!(cut("aéb", 2), "a … (3 more bytes)");
    }

    #[test]
    fn a_multi_line_cut_ends_at_a_line_end_near_the_limit() {
        let script = "line one\nline two\nline three\n";
        // 20 bytes end inside "line three"; the newline at byte 17 is in the last quarter.
        assert_eq!(cut(script, 20), "line one\nline two\n… (12 more bytes)");
    }

    #[test]
    fn a_huge_script_is_echoed_as_a_few_kib() {
        let script = "echo 0123456789\n".repeat(1_000_000);
        let echoed = cut(&script, MAX_ECHO_BYTES);
        assert!(echoed.len() <= MAX_ECHO_BYTES + 40, "{}", echoed.len());
        // The cut ends at the newline at byte 4095.
        assert!(echoed.ends_with(&format!("\n… ({} more bytes)", script.len() - 4095)));
    }

    #[test]
    fn a_one_line_script_is_its_own_title() {
        assert_eq!(one_line_title("ls -la"), "ls -la");
        assert_eq!(one_line_title(""), "");
    }

    #[test]
    fn a_multi_line_script_is_titled_by_its_first_line_and_how_many_follow() {
        assert_eq!(one_line_title("make\nmake test"), "make … (1 more line)");
        assert_eq!(
            one_line_title("mkdir -p out\ntouch out/a out/b\nls out"),
            "mkdir -p out … (2 more lines)"
        );
    }

    #[test]
    fn a_long_first_line_is_cut_in_the_title() {
        let title = one_line_title(&format!("{}\nls", "x".repeat(500)));
        assert_eq!(
            title,
            format!("{}… … (1 more line)", "x".repeat(MAX_LINE_CHARS))
        );
    }

    #[test]
    fn a_one_line_script_is_not_echoed() {
        assert_eq!(echo_lines("ls -la"), "");
    }

    #[test]
    fn a_short_script_is_echoed_whole_after_prompts() {
        assert_eq!(
            echo_lines("mkdir -p out\n  touch out/a\nls out"),
            "$ mkdir -p out\n$   touch out/a\n$ ls out\n"
        );
    }

    #[test]
    fn a_long_script_is_echoed_as_ten_lines_the_last_saying_how_many_more() {
        let script: Vec<String> = (1..=25).map(|n| format!("echo {n}")).collect();
        let echo = echo_lines(&script.join("\n"));
        let lines: Vec<&str> = echo.lines().collect();
        assert_eq!(lines.len(), MAX_ECHO_LINES);
        assert_eq!(lines[0], "$ echo 1");
        assert_eq!(lines[8], "$ echo 9");
        assert_eq!(lines[9], "$ … (16 more lines)");
    }

    #[test]
    fn a_script_of_exactly_ten_lines_is_echoed_whole() {
        let script: Vec<String> = (1..=10).map(|n| format!("echo {n}")).collect();
        let echo = echo_lines(&script.join("\n"));
        assert_eq!(echo.lines().last(), Some("$ echo 10"));
    }
}
