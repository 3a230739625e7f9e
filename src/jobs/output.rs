//! What a background job printed, kept bounded: the first bytes and the last bytes around a gap
//! line, like a command's result, and readable at any time (while the job runs, too).
//!
//! Owns the memory bound and the "last N lines" view. Must not touch: the full log (the engine
//! writes it when a run's output is too large, see [`crate::exec::capture`]), live streaming.

/// A job's output so far: all of it while it is small, else a head, a gap and a tail.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobOutput {
    head: String,
    head_limit: usize,
    /// Set once a piece did not fit in the head: everything after goes to the tail.
    head_closed: bool,
    /// The newest text; trimmed back to `tail_limit` bytes whenever it grows past twice that.
    tail: String,
    tail_limit: usize,
    dropped_bytes: u64,
}

impl JobOutput {
    /// Keeps at most `head_limit` bytes from the start and about `tail_limit` (at most twice
    /// that) from the end.
    pub fn new(head_limit: usize, tail_limit: usize) -> Self {
        JobOutput {
            head: String::new(),
            head_limit,
            head_closed: false,
            tail: String::new(),
            tail_limit,
            dropped_bytes: 0,
        }
    }

    /// Adds one chunk of output (whole characters, as the engine streams them).
    pub fn push(&mut self, mut chunk: &str) {
        if !self.head_closed {
            let room = self.head_limit - self.head.len();
            let take = floor_char_boundary(chunk, room);
            self.head.push_str(&chunk[..take]);
            chunk = &chunk[take..];
            if !chunk.is_empty() {
                self.head_closed = true;
            }
        }
        if chunk.is_empty() {
            return;
        }
        self.tail.push_str(chunk);
        if self.tail.len() > self.tail_limit.saturating_mul(2).max(1) {
            let cut = ceil_char_boundary(&self.tail, self.tail.len() - self.tail_limit);
            self.tail.drain(..cut);
            self.dropped_bytes += cut as u64;
        }
    }

    /// How many bytes were dropped between the head and the tail.
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped_bytes
    }

    /// Everything kept: the head, then (if anything was dropped) a gap line, then the tail.
    pub fn text(&self) -> String {
        let mut text = self.head.clone();
        if self.dropped_bytes > 0 {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!(
                "[… {} bytes of output dropped here …]\n",
                self.dropped_bytes
            ));
        }
        text.push_str(&self.tail);
        text
    }

    /// The last `n` lines of [`Self::text`] (a last line without a newline counts as a line).
    pub fn last_lines(&self, n: usize) -> String {
        last_lines(&self.text(), n).to_string()
    }
}

/// The last `n` lines of `text`: the whole text when it has no more than `n`.
pub fn last_lines(text: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    match body.rmatch_indices('\n').nth(n - 1) {
        Some((newline, _)) => &text[newline + 1..],
        None => text,
    }
}

use crate::text::{ceil_boundary as ceil_char_boundary, floor_boundary as floor_char_boundary};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let mut output = JobOutput::new(8, 8);
        output.push("hello ");
        output.push("world\n");
        assert_eq!(output.text(), "hello world\n");
        assert_eq!(output.dropped_bytes(), 0);
    }

    #[test]
    fn large_output_keeps_head_gap_and_tail() {
        let mut output = JobOutput::new(4, 4);
        for _ in 0..100 {
            output.push("abcdefghij");
        }
        let text = output.text();
        assert!(text.starts_with("abcd\n[… "), "{text}");
        assert!(
            text.ends_with(" bytes of output dropped here …]\nghij"),
            "{text}"
        );
        assert_eq!(
            4 + output.dropped_bytes() as usize + output.tail.len(),
            1000,
            "every byte is kept or counted"
        );
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let mut output = JobOutput::new(3, 2);
        output.push("éééééééé");
        let text = output.text();
        assert!(text.starts_with("é\n[…"), "{text}");
        assert!(text.ends_with("…]\né"), "{text}");
    }

    #[test]
    fn last_lines_counts_from_the_end() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc\n");
        assert_eq!(last_lines("a\nb\nc", 2), "b\nc");
        assert_eq!(last_lines("a\nb\nc\n", 3), "a\nb\nc\n");
        assert_eq!(last_lines("a\nb\nc\n", 50), "a\nb\nc\n");
        assert_eq!(last_lines("a\n\n\n", 2), "\n\n");
        assert_eq!(last_lines("", 5), "");
        assert_eq!(last_lines("a\n", 0), "");
    }

    proptest::proptest! {
        /// Oracle: the lines of the whole output, taken with `str::lines`-like splitting.
        #[test]
        fn last_lines_matches_splitting_the_text(
            lines in proptest::collection::vec("[a-c]{0,3}", 0..12),
            trailing_newline in proptest::bool::ANY,
            n in 0usize..15,
        ) {
            let mut text = lines.join("\n");
            if trailing_newline && !lines.is_empty() {
                text.push('\n');
            }
            let all: Vec<&str> = text.split_inclusive('\n').collect();
            let expected: String = all[all.len().saturating_sub(n)..].concat();
            proptest::prop_assert_eq!(last_lines(&text, n), expected.as_str());
        }

        /// Whatever the pieces, small output comes back whole, and large output keeps exactly
        /// the first `head` bytes and ends with the last bytes printed.
        #[test]
        fn kept_text_is_a_head_and_a_tail_of_the_output(
            pieces in proptest::collection::vec("[a-zé✓\n]{0,20}", 0..30),
            head_limit in 0usize..16,
            tail_limit in 1usize..16,
        ) {
            let mut output = JobOutput::new(head_limit, tail_limit);
            for piece in &pieces {
                output.push(piece);
            }
            let whole: String = pieces.concat();
            let text = output.text();
            if output.dropped_bytes() == 0 {
                proptest::prop_assert_eq!(text, whole);
            } else {
                let head = &whole[..floor_char_boundary(&whole, head_limit)];
                proptest::prop_assert!(text.starts_with(head));
                proptest::prop_assert!(whole.ends_with(&output.tail));
                proptest::prop_assert!(output.tail.len() >= tail_limit.saturating_sub(3));
                proptest::prop_assert_eq!(
                    output.head.len() + output.dropped_bytes() as usize + output.tail.len(),
                    whole.len()
                );
            }
        }
    }
}
