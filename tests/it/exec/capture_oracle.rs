//! The bounded capture (`exec::capture`) against a naive model that keeps everything and cuts
//! the head and the tail on character boundaries found with `str::is_char_boundary`: the result
//! must not depend on how the output was cut into pieces, and must equal the model's.

use acp_bash::exec::capture::Capture;
use proptest::prelude::*;

/// The model: the whole output, cut the obvious way.
fn model(output: &str, head_limit: usize, tail_limit: usize) -> (String, Option<u64>) {
    let window = head_limit + (2 * tail_limit).max(1);
    if output.len() <= window {
        return (output.to_string(), None);
    }
    let head_end = (0..=head_limit)
        .rev()
        .find(|&i| output.is_char_boundary(i))
        .unwrap();
    let tail_start = (output.len() - tail_limit..=output.len())
        .find(|&i| output.is_char_boundary(i))
        .unwrap();
    let (head, tail) = (&output[..head_end], &output[tail_start..]);
    let dropped = (output.len() - head.len() - tail.len()) as u64;
    let mut text = head.to_string();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("[… {dropped} bytes of output dropped here …]\n"));
    text.push_str(tail);
    (text, Some(dropped))
}

fn capture(
    pieces: &[&[u8]],
    head_limit: usize,
    tail_limit: usize,
) -> acp_bash::exec::capture::Captured {
    let dir = tempfile::tempdir().unwrap();
    let mut capture = Capture::new(head_limit, tail_limit, &dir.path().join("logs"));
    for piece in pieces {
        capture.push(piece);
    }
    let captured = capture.finish();
    // The log (when there is one) holds every byte; read it before the directory goes.
    if let Some(truncation) = &captured.truncation {
        let path = truncation.full_output.as_ref().expect("a log");
        let log = std::fs::read(path).unwrap();
        assert_eq!(log, pieces.concat(), "the log holds the whole output");
    }
    captured
}

fn cut<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| (*c).min(bytes.len())).collect();
    cuts.sort();
    let mut pieces = Vec::new();
    let mut start = 0;
    for end in cuts.into_iter().chain([bytes.len()]) {
        pieces.push(&bytes[start..end]);
        start = end;
    }
    pieces
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn text_output_matches_the_keep_everything_model(
        output in "[a-z\n€é𝄞✓]{0,120}",
        cuts in proptest::collection::vec(0usize..400, 0..12),
        head_limit in 0usize..40,
        tail_limit in 0usize..40,
    ) {
        let captured = capture(&cut(output.as_bytes(), &cuts), head_limit, tail_limit);
        let (text, dropped) = model(&output, head_limit, tail_limit);
        prop_assert_eq!(&captured.text, &text);
        prop_assert_eq!(captured.truncation.as_ref().map(|t| t.dropped_bytes), dropped);
        prop_assert_eq!(captured.log_error, None);
    }

    /// Arbitrary bytes (invalid UTF-8 included): the log holds everything, and the kept head and
    /// tail are bounded on both sides: never more than the limits, never more than 3 bytes
    /// (one partial character) less.
    #[test]
    fn any_bytes_keep_between_the_limit_less_a_partial_character_and_the_limit(
        output in proptest::collection::vec(any::<u8>(), 0..300),
        cuts in proptest::collection::vec(0usize..300, 0..12),
        head_limit in 0usize..40,
        tail_limit in 0usize..40,
    ) {
        let captured = capture(&cut(&output, &cuts), head_limit, tail_limit);
        match captured.truncation {
            None => {
                prop_assert!(output.len() <= head_limit + (2 * tail_limit).max(1));
                prop_assert_eq!(captured.text, String::from_utf8_lossy(&output));
            }
            Some(truncation) => {
                prop_assert!(output.len() > head_limit + (2 * tail_limit).max(1));
                let kept = output.len() as u64 - truncation.dropped_bytes;
                let most = (head_limit + tail_limit) as u64;
                prop_assert!(kept <= most, "kept {} of at most {}", kept, most);
                prop_assert!(kept + 6 >= most, "kept only {} of {}", kept, most);
                let gap = format!(
                    "[… {} bytes of output dropped here …]\n",
                    truncation.dropped_bytes
                );
                prop_assert!(captured.text.contains(&gap), "{:?}", captured.text);
            }
        }
    }
}

/// The cut through each byte of a 4-byte character, on both sides.
#[test]
fn four_byte_characters_are_never_cut() {
    let output = "𝄞".repeat(10);
    for limit in 0..12 {
        let captured = capture(&[output.as_bytes()], limit, limit);
        let (text, _) = model(&output, limit, limit);
        assert_eq!(captured.text, text, "limit {limit}");
        assert!(!captured.text.contains('\u{fffd}'), "limit {limit}");
    }
    // Tail limit 7: the last 7 bytes are 3 continuation bytes and one whole 𝄞; skipping 3
    // continuation bytes (not 2) finds the character's start.
    let captured = capture(&[output.as_bytes()], 0, 7);
    assert!(captured.text.ends_with("…]\n𝄞"), "{:?}", captured.text);
}
