//! Small text helpers shared by capture, jobs, the store and presentation.
//!
//! Owns: cutting text and bytes at UTF-8 character boundaries, the head-and-tail cut of a long
//! text, and human sizes and durations (`4 MiB`, `3m05s`). Must not touch: what any caller does
//! with the pieces (wording of notices, limits).

use std::time::Duration;

/// The largest index `<= at` (and `<= text.len()`) that is a character boundary of `text`.
pub fn floor_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest index `>= at` (and `<= text.len()`) that is a character boundary of `text`.
pub fn ceil_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// The first at most `max` bytes of `text`, cut on a character boundary.
pub fn cut_at_boundary(text: &str, max: usize) -> &str {
    &text[..floor_boundary(text, max)]
}

/// The last at most `max` bytes of `text`, cut on a character boundary.
pub fn last_at_boundary(text: &str, max: usize) -> &str {
    &text[ceil_boundary(text, text.len().saturating_sub(max))..]
}

/// `(head, tail, omitted)`: all of `text` as the head when it fits in `head + tail` bytes, else
/// its first `head` and last `tail` bytes (on character boundaries) and how many bytes were left
/// out between them.
pub fn head_and_tail(text: &str, head: usize, tail: usize) -> (&str, &str, u64) {
    if text.len() <= head + tail {
        return (text, "", 0);
    }
    let head_end = floor_boundary(text, head);
    let tail_start = ceil_boundary(text, text.len() - tail);
    (
        &text[..head_end],
        &text[tail_start..],
        (tail_start - head_end) as u64,
    )
}

/// The length of the longest prefix of `bytes` that does not end inside a UTF-8 character
/// (invalid bytes count as complete: they become U+FFFD).
pub fn utf8_safe_end(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(3) {
        let byte = bytes[len - back];
        if byte & 0xc0 == 0x80 {
            continue; // a continuation byte: look further back for the lead byte
        }
        let needed = match byte {
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => 1,
        };
        return if needed > back { len - back } else { len };
    }
    len
}

/// The offset of the first byte of `bytes` that starts a character (skips at most 3
/// continuation bytes left over from a cut).
pub fn utf8_safe_start(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| **b & 0xc0 == 0x80)
        .count()
}

/// A size the way notices say it: `4 MiB`, `64 KiB` when it is a whole number of them, else
/// `N bytes`.
pub fn human_bytes(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    const KIB: usize = 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// A duration the way `/jobs` shows it: `850ms`, `12s`, `3m05s`, `2h07m`.
pub fn human_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0 => format!("{}ms", duration.as_millis()),
        1..60 => format!("{secs}s"),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let text = "aé€😀b"; // 1 + 2 + 3 + 4 + 1 bytes
        for max in 0..=text.len() + 1 {
            let head = cut_at_boundary(text, max);
            assert!(head.len() <= max && text.starts_with(head), "{max}");
            let tail = last_at_boundary(text, max);
            assert!(tail.len() <= max && text.ends_with(tail), "{max}");
        }
        assert_eq!(cut_at_boundary(text, 2), "a");
        assert_eq!(last_at_boundary(text, 4), "b");
        assert_eq!(floor_boundary(text, 99), text.len());
        assert_eq!(ceil_boundary(text, 2), 3);
    }

    #[test]
    fn head_and_tail_keeps_both_ends_and_counts_the_gap() {
        assert_eq!(head_and_tail("short", 3, 3), ("short", "", 0));
        assert_eq!(head_and_tail("0123456789", 3, 2), ("012", "89", 5));
        let (head, tail, omitted) = head_and_tail("ééééé", 3, 3);
        assert_eq!((head, tail, omitted), ("é", "é", 6));
    }

    #[test]
    fn byte_cuts_never_split_a_character() {
        let bytes = "a€".as_bytes(); // 1 + 3
        assert_eq!(utf8_safe_end(&bytes[..2]), 1);
        assert_eq!(utf8_safe_end(bytes), 4);
        assert_eq!(utf8_safe_start(&bytes[2..]), 2);
        assert_eq!(utf8_safe_start(b"abc"), 0);
    }

    #[test]
    fn sizes_and_durations_are_short() {
        assert_eq!(human_bytes(4 << 20), "4 MiB");
        assert_eq!(human_bytes(64 << 10), "64 KiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
        assert_eq!(human_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(human_duration(Duration::from_secs(12)), "12s");
        assert_eq!(human_duration(Duration::from_secs(185)), "3m05s");
        assert_eq!(human_duration(Duration::from_secs(7620)), "2h07m");
    }
}
