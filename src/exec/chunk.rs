//! Cuts a byte stream into text chunks that are safe to hand to a terminal emulator one by one.
//!
//! Owns: never ending a chunk inside a UTF-8 character or an ANSI/VT escape sequence (some Zed
//! releases build a fresh VT parser per chunk), and replacing invalid UTF-8 instead of failing.
//! Memory stays bounded: an escape sequence longer than [`MAX_HELD_BYTES`] is let through as is.

use std::borrow::Cow;

/// The most bytes held back waiting for an escape sequence or character to complete.
pub const MAX_HELD_BYTES: usize = 4096;

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;

/// Where the scanner is, relative to escape sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Plain text.
    Ground,
    /// Just after ESC.
    Escape,
    /// Inside `ESC [` … final byte.
    Csi,
    /// Inside a string sequence (OSC `ESC ]`, DCS `ESC P`, SOS, PM, APC) ended by BEL or `ESC \`.
    String,
    /// Inside a string sequence, just after an ESC (the start of `ESC \`, maybe).
    StringEscape,
}

/// Turns output bytes into chunks of text with safe boundaries.
#[derive(Debug)]
#[non_exhaustive]
pub struct Chunker {
    /// Bytes received but not yet emitted (an unfinished sequence or character at the end).
    held: Vec<u8>,
    state: State,
    /// Offset in `held` where the unfinished escape sequence starts (when `state != Ground`).
    sequence_start: usize,
}

impl Default for Chunker {
    fn default() -> Self {
        Chunker {
            held: Vec::new(),
            state: State::Ground,
            sequence_start: 0,
        }
    }
}

impl Chunker {
    /// Feeds `bytes`; returns the text that is safe to emit now (possibly empty).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.push_borrowed(bytes).into_owned()
    }

    /// Like [`Chunker::push`], but borrows from `bytes` when it can: when nothing was held back,
    /// the safe prefix of `bytes` is emitted without a copy (only a trailing unfinished sequence
    /// or character is kept). The engine's hot path: most reads are plain, complete text.
    pub fn push_borrowed<'b>(&mut self, bytes: &'b [u8]) -> Cow<'b, str> {
        if !self.held.is_empty() {
            return Cow::Owned(self.push_held(bytes));
        }
        self.scan(bytes, 0);
        let cut = self.safe_cut(bytes);
        self.held.extend_from_slice(&bytes[cut..]);
        self.sequence_start = self.sequence_start.saturating_sub(cut);
        utf8_lossy(&bytes[..cut])
    }

    /// The general case: append to what is held, emit its safe prefix.
    fn push_held(&mut self, bytes: &[u8]) -> String {
        let scan_from = self.held.len();
        self.held.extend_from_slice(bytes);
        let held = std::mem::take(&mut self.held);
        self.scan(&held, scan_from);
        let cut = self.safe_cut(&held);
        self.held = held;
        let text = utf8_lossy(&self.held[..cut]).into_owned();
        self.held.drain(..cut);
        self.sequence_start = self.sequence_start.saturating_sub(cut);
        text
    }

    /// Where `pending` (everything not yet emitted, scanned) can be cut now.
    fn safe_cut(&mut self, pending: &[u8]) -> usize {
        let mut cut = if self.state == State::Ground {
            pending.len()
        } else {
            self.sequence_start
        };
        cut = utf8_safe_end(&pending[..cut]);
        if pending.len() - cut > MAX_HELD_BYTES {
            // A sequence this long is not one a terminal would honour: stop waiting for it.
            self.state = State::Ground;
            cut = utf8_safe_end(pending);
        }
        cut
    }

    /// Emits whatever is held back (the stream ended).
    pub fn finish(&mut self) -> String {
        self.state = State::Ground;
        self.sequence_start = 0;
        let text = utf8_lossy(&self.held).into_owned();
        self.held.clear();
        text
    }

    /// Advances the escape-sequence state over `pending[from..]`, where `pending` is everything
    /// not yet emitted (`sequence_start` is an offset in it).
    fn scan(&mut self, pending: &[u8], from: usize) {
        let mut index = from;
        while index < pending.len() {
            if self.state == State::Ground {
                // Fast path: jump to the next ESC.
                match memchr::memchr(ESC, &pending[index..]) {
                    None => return,
                    Some(offset) => {
                        index += offset;
                        self.sequence_start = index;
                        self.state = State::Escape;
                        index += 1;
                        continue;
                    }
                }
            }
            let byte = pending[index];
            self.state = match (self.state, byte) {
                (State::Escape, b'[') => State::Csi,
                (State::Escape, b']' | b'P' | b'X' | b'^' | b'_') => State::String,
                (State::Escape, ESC) => {
                    self.sequence_start = index;
                    State::Escape
                }
                // Intermediate bytes (`ESC ( B`) keep the sequence open; anything else ends it.
                (State::Escape, 0x20..=0x2f) => State::Escape,
                (State::Escape, _) => State::Ground,
                (State::Csi, 0x20..=0x3f) => State::Csi,
                (State::Csi, ESC) => {
                    self.sequence_start = index;
                    State::Escape
                }
                (State::Csi, _) => State::Ground,
                (State::String, BEL) => State::Ground,
                (State::String, ESC) => State::StringEscape,
                (State::String, _) => State::String,
                (State::StringEscape, b'\\') => State::Ground,
                (State::StringEscape, ESC) => State::StringEscape,
                (State::StringEscape, _) => State::String,
                (State::Ground, _) => unreachable!("handled by the fast path"),
            };
            index += 1;
        }
    }
}

/// `bytes` as text, invalid sequences replaced by U+FFFD. Valid input (the common case) is
/// checked with `str::from_utf8`, which has a word-at-a-time ASCII fast path, and borrowed;
/// `String::from_utf8_lossy` alone walks byte by byte (it was 45% of the engine's CPU on 1 GiB).
fn utf8_lossy(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

pub use crate::text::{utf8_safe_end, utf8_safe_start};

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn chunks_of(input: &[u8], split_at: &[usize]) -> Vec<String> {
        let mut chunker = Chunker::default();
        let mut out = Vec::new();
        let mut start = 0;
        for &end in split_at.iter().chain(std::iter::once(&input.len())) {
            out.push(chunker.push(&input[start..end]));
            start = end;
        }
        out.push(chunker.finish());
        out.retain(|chunk| !chunk.is_empty());
        out
    }

    #[test]
    fn a_multibyte_character_is_never_split() {
        let text = "héllo €𝄞";
        let bytes = text.as_bytes();
        for split in 1..bytes.len() {
            let chunks = chunks_of(bytes, &[split]);
            assert_eq!(chunks.concat(), text, "split at {split}");
        }
        assert_eq!(chunks_of("a€".as_bytes(), &[2]), ["a", "€"]);
    }

    #[test]
    fn escape_sequences_are_held_until_complete() {
        let cases: &[(&[u8], usize, [&str; 2])] = &[
            (b"red \x1b[31mX", 6, ["red ", "\x1b[31mX"]),
            (b"\x1b]0;title\x07after", 5, ["", "\x1b]0;title\x07after"]),
            (
                b"x\x1b]8;;http://a\x1b\\link",
                12,
                ["x", "\x1b]8;;http://a\x1b\\link"],
            ),
            (b"a\x1b(Bb", 3, ["a", "\x1b(Bb"]),
        ];
        for (input, split, expected) in cases {
            let chunks = chunks_of(input, &[*split]);
            let expected: Vec<&str> = expected.iter().copied().filter(|s| !s.is_empty()).collect();
            assert_eq!(
                chunks,
                expected,
                "{:?} split at {split}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        assert_eq!(
            chunks_of(b"ok\xff\xfe!", &[3]).concat(),
            "ok\u{fffd}\u{fffd}!"
        );
    }

    #[test]
    fn an_endless_escape_sequence_is_let_through_after_the_limit() {
        let mut chunker = Chunker::default();
        assert_eq!(chunker.push(b"\x1b]0;"), "");
        let flood = vec![b'x'; MAX_HELD_BYTES + 1];
        let text = chunker.push(&flood);
        assert_eq!(text.len(), MAX_HELD_BYTES + 5);
        assert_eq!(chunker.push(b"plain"), "plain");
    }

    #[test]
    fn cut_text_is_trimmed_to_whole_characters_on_both_sides() {
        // The oracle is std's `is_char_boundary`, not the code under test.
        let text = "a€𝄞é";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let next = (cut..=bytes.len()).find(|&i| text.is_char_boundary(i));
            assert_eq!(
                Some(cut + utf8_safe_start(&bytes[cut..])),
                next,
                "tail from {cut}"
            );
            let previous = (0..=cut).rev().find(|&i| text.is_char_boundary(i));
            assert_eq!(
                Some(utf8_safe_end(&bytes[..cut])),
                previous,
                "head to {cut}"
            );
        }
    }

    #[test]
    fn a_sequence_is_held_up_to_the_limit_and_let_through_one_byte_after() {
        let mut chunker = Chunker::default();
        let mut sequence = b"\x1b[".to_vec();
        sequence.resize(MAX_HELD_BYTES, b'1');
        assert_eq!(
            chunker.push(&sequence),
            "",
            "exactly the limit is still held"
        );
        assert_eq!(chunker.push(b"1").len(), MAX_HELD_BYTES + 1);
    }

    #[test]
    fn text_before_a_held_sequence_does_not_count_against_the_limit() {
        let mut chunker = Chunker::default();
        let text = "a".repeat(MAX_HELD_BYTES - 1000);
        assert_eq!(chunker.push(format!("{text}\x1b[").as_bytes()), text);
        assert_eq!(chunker.push(b"1m"), "\x1b[1m");
    }

    #[test]
    fn what_is_held_at_the_end_comes_out_on_finish() {
        let mut chunker = Chunker::default();
        assert_eq!(chunker.push(b"x\x1b["), "x");
        assert_eq!(chunker.finish(), "\x1b[");
        assert_eq!(chunker.push(b"y\xe2\x82"), "y");
        assert_eq!(chunker.finish(), String::from_utf8_lossy(b"\xe2\x82"));
        assert_eq!(chunker.finish(), "", "nothing is emitted twice");
    }

    fn escape_free_prefixes(chunk: &str) -> bool {
        // A chunk must not end inside a sequence: scanning it alone must end in Ground.
        let mut chunker = Chunker::default();
        chunker.scan_public(chunk.as_bytes())
    }

    impl Chunker {
        fn scan_public(&mut self, bytes: &[u8]) -> bool {
            self.scan(bytes, 0);
            self.state == State::Ground
        }
    }

    proptest! {
        #[test]
        fn chunks_concatenate_to_the_lossy_input_and_end_on_safe_boundaries(
            parts in proptest::collection::vec(
                prop_oneof![
                    "[a-z€𝄞 \n]{0,8}".prop_map(String::into_bytes),
                    Just(b"\x1b[1;31m".to_vec()),
                    Just(b"\x1b]0;t\x07".to_vec()),
                    Just(b"\x1b]8;;u\x1b\\".to_vec()),
                    Just(b"\x1b(B".to_vec()),
                ],
                0..12,
            ),
            splits in proptest::collection::vec(0usize..200, 0..6),
        ) {
            let input: Vec<u8> = parts.concat();
            let mut splits: Vec<usize> = splits.into_iter().map(|s| s.min(input.len())).collect();
            splits.sort();
            let chunks = chunks_of(&input, &splits);
            prop_assert_eq!(chunks.concat(), String::from_utf8_lossy(&input).into_owned());
            for chunk in &chunks {
                prop_assert!(escape_free_prefixes(chunk), "chunk ends inside a sequence: {:?}", chunk);
            }
        }
    }
}
