//! The ANSI stripper (`present::ansi`) against an independent VT parser (`vte`): what remains
//! of a text is exactly what a terminal would print (plus `\n`, `\r`, `\t`).

use acp_bash::present::ansi::{strip_escapes, to_plain_text};
use proptest::prelude::*;

use crate::support::vt::{printed_text, SEQUENCES};

fn part() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9 \n\t\r€é𝄞✓\\[\\]\x07\x08]{0,8}",
        2 => proptest::sample::select(SEQUENCES).prop_map(str::to_string),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn stripping_leaves_what_a_terminal_prints(parts in proptest::collection::vec(part(), 0..12)) {
        let text = parts.concat();
        prop_assert_eq!(strip_escapes(&text), printed_text(&text), "{:?}", text);
    }
}

/// Every sequence family on its own, between text.
#[test]
fn each_sequence_family_is_removed_whole() {
    for sequence in SEQUENCES {
        let text = format!("a{sequence}b");
        assert_eq!(strip_escapes(&text), "ab", "{sequence:?}");
        assert_eq!(
            printed_text(&text),
            "ab",
            "the oracle agrees on {sequence:?}"
        );
    }
    // The case: a CSI with an intermediate byte (cursor shape) leaves nothing behind.
    assert_eq!(to_plain_text("\x1b[2 qprompt$ \x1b[0 q\n"), "prompt$ \n");
}
