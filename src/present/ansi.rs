//! Turning terminal output into plain text for clients that show it as a code block.
//!
//! Owns the one job of removing what a terminal would interpret rather than print: ANSI/VT escape
//! sequences, control characters, and carriage-return overwrites. Must not touch: markers, fences,
//! anything ACP. A terminal card gets the output untouched; only the console block uses this.
//!
//! What is removed:
//! - CSI sequences (`ESC [` params intermediates final), e.g. colours and cursor moves;
//! - OSC sequences (`ESC ]` … ended by BEL or `ESC \`), e.g. window titles and hyperlinks
//!   (the link text between them stays);
//! - DCS, SOS, PM and APC strings (`ESC P`, `ESC X`, `ESC ^`, `ESC _` … `ESC \`);
//! - every other escape sequence (`ESC` intermediates final, e.g. `ESC ( B`, `ESC 7`);
//! - C0 control characters and DEL, except `\n` and `\t`.
//!
//! Line endings: `\r\n` becomes `\n`. A lone `\r` (a progress bar redrawing its line) is reduced
//! to what was written last: each line keeps its last non-empty `\r`-separated segment, so
//! `10%\r55%\r100%\n` becomes `100%\n`. A real terminal would overlay the segments column by
//! column, but progress output nearly always erases or rewrites the whole line (and the erase
//! sequence itself is stripped here), so the last segment is the better guess.

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';

/// `text` with escape sequences and control characters removed and `\r` overwrites resolved.
pub fn to_plain_text(text: &str) -> String {
    resolve_carriage_returns(&strip_escapes(text))
}

/// Removes escape sequences and control characters other than `\n`, `\r` and `\t`.
pub fn strip_escapes(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ESC {
            // C1 controls (U+0080..U+009F) are not interpreted by UTF-8 terminals by default,
            // so only ASCII controls are dropped.
            if !c.is_ascii_control() || matches!(c, '\n' | '\r' | '\t') {
                plain.push(c);
            }
            continue;
        }
        match chars.next() {
            // CSI: parameter bytes, intermediate bytes, one final byte. A character outside
            // those ranges aborts the sequence and is printed, as a terminal would.
            Some('[') => {
                while let Some(&next) = chars.peek() {
                    match next {
                        '\u{30}'..='\u{3f}' | '\u{20}'..='\u{2f}' => {
                            chars.next();
                        }
                        '\u{40}'..='\u{7e}' => {
                            chars.next();
                            break;
                        }
                        _ => break,
                    }
                }
            }
            // OSC: ended by BEL or ST (`ESC \`).
            Some(']') => skip_string(&mut chars, true),
            // DCS, SOS, PM, APC: ended by ST.
            Some('P' | 'X' | '^' | '_') => skip_string(&mut chars, false),
            // Any other escape: intermediates, then one final byte.
            Some('\u{20}'..='\u{2f}') => {
                while let Some(&next) = chars.peek() {
                    chars.next();
                    if !('\u{20}'..='\u{2f}').contains(&next) {
                        break;
                    }
                }
            }
            Some(_) | None => {}
        }
    }
    plain
}

/// Consumes a control string up to and including its terminator (or to the end of the text).
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, bel_ends: bool) {
    while let Some(c) = chars.next() {
        if bel_ends && c == BEL {
            return;
        }
        if c == ESC && chars.peek() == Some(&'\\') {
            chars.next();
            return;
        }
    }
}

/// `\r\n` → `\n`; in each line, only the last non-empty `\r`-separated segment stays.
pub fn resolve_carriage_returns(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_string();
    }
    let mut plain = String::with_capacity(text.len());
    for (index, line) in text.split('\n').enumerate() {
        if index > 0 {
            plain.push('\n');
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        let shown = line
            .rsplit('\r')
            .find(|segment| !segment.is_empty())
            .unwrap_or("");
        plain.push_str(shown);
    }
    plain
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_unchanged() {
        let text = "hello\tworld\n  ünïcödé ✓ 🎉\n";
        assert_eq!(to_plain_text(text), text);
    }

    #[test]
    fn colours_and_cursor_moves_are_removed() {
        assert_eq!(
            to_plain_text("\u{1b}[1;31merror\u{1b}[0m: bad\n"),
            "error: bad\n"
        );
        assert_eq!(to_plain_text("a\u{1b}[2K\u{1b}[1Gb\u{1b}[?25l"), "ab");
        assert_eq!(to_plain_text("\u{1b}[38;2;255;0;0mred\u{1b}[m"), "red");
    }

    #[test]
    fn osc_sequences_end_at_bel_or_string_terminator() {
        assert_eq!(to_plain_text("\u{1b}]0;my title\u{7}prompt$ "), "prompt$ ");
        let link = "\u{1b}]8;;https://example.com\u{1b}\\the link\u{1b}]8;;\u{1b}\\ after";
        assert_eq!(to_plain_text(link), "the link after");
    }

    #[test]
    fn a_backslash_inside_a_string_does_not_end_it() {
        // Only ESC followed by `\` is the string terminator; a path in a title or a link is not.
        assert_eq!(to_plain_text("\u{1b}]0;C:\\dir\\file\u{7}after"), "after");
        assert_eq!(to_plain_text("\u{1b}Pq\\x\u{1b}\\after"), "after");
    }

    #[test]
    fn other_escape_sequences_and_strings_are_removed() {
        assert_eq!(
            to_plain_text("\u{1b}(Bplain\u{1b}7\u{1b}8\u{1b}=x\u{1b}c"),
            "plainx"
        );
        assert_eq!(to_plain_text("a\u{1b}Pq#0;2;0;0;0\u{1b}\\b"), "ab");
        assert_eq!(to_plain_text("a\u{1b}_apc payload\u{1b}\\b"), "ab");
    }

    #[test]
    fn an_unfinished_sequence_at_the_end_is_dropped() {
        assert_eq!(to_plain_text("done\u{1b}"), "done");
        assert_eq!(to_plain_text("done\u{1b}[1;3"), "done");
        assert_eq!(to_plain_text("done\u{1b}]0;title never ends"), "done");
    }

    #[test]
    fn a_malformed_csi_stops_at_the_first_character_that_cannot_belong_to_it() {
        assert_eq!(to_plain_text("\u{1b}[12é text"), "é text");
        assert_eq!(to_plain_text("\u{1b}[1\nnext"), "\nnext");
    }

    #[test]
    fn control_characters_other_than_newline_and_tab_are_removed() {
        assert_eq!(
            to_plain_text("a\u{7}b\u{8}c\u{0}d\u{7f}e\tf\n"),
            "abcde\tf\n"
        );
    }

    #[test]
    fn crlf_becomes_lf() {
        assert_eq!(to_plain_text("one\r\ntwo\r\n"), "one\ntwo\n");
    }

    #[test]
    fn a_progress_bar_keeps_only_what_was_written_last() {
        assert_eq!(to_plain_text("10%\r55%\r100%\ndone\n"), "100%\ndone\n");
        assert_eq!(
            to_plain_text("working 1/3\r\u{1b}[Kworking 3/3\r"),
            "working 3/3"
        );
        assert_eq!(to_plain_text("a\r\r\n"), "a\n");
    }

    proptest::proptest! {
        #[test]
        fn plain_text_holds_no_escape_and_no_control_but_newline_and_tab(
            text in "(\\PC|\u{1b}|\u{7}|\r|\n|\t|\\[|\\]|\\\\|;|[0-9])*"
        ) {
            let plain = to_plain_text(&text);
            proptest::prop_assert!(
                plain.chars().all(|c| !c.is_ascii_control() || c == '\n' || c == '\t'),
                "{:?} -> {:?}", text, plain
            );
            // Resolving carriage returns never adds or removes a line.
            proptest::prop_assert_eq!(
                plain.matches('\n').count(),
                strip_escapes(&text).matches('\n').count()
            );
        }
    }
}
