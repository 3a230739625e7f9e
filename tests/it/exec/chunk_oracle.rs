//! The chunker (`exec::chunk`) judged by oracles that are not its own code: every chunk is
//! decoded on its own (no character is cut: valid input never yields U+FFFD), and a fresh VT
//! parser (`vte`) must be back in its ground state at the end of every chunk.

use acp_bash::exec::chunk::Chunker;
use proptest::prelude::*;

use crate::support::vt::{ends_in_ground, SEQUENCES};

fn chunks_of(input: &[u8], splits: &[usize]) -> Vec<String> {
    let mut chunker = Chunker::default();
    let mut out = Vec::new();
    let mut start = 0;
    for &end in splits.iter().chain(std::iter::once(&input.len())) {
        out.push(chunker.push(&input[start..end]));
        start = end;
    }
    out.push(chunker.finish());
    out.retain(|chunk| !chunk.is_empty());
    out
}

fn part() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9 \n\t\r€é𝄞✓\\[\\]]{0,8}",
        2 => proptest::sample::select(SEQUENCES).prop_map(str::to_string),
    ]
}

fn check(input: &[u8], splits: &[usize]) -> Result<(), TestCaseError> {
    let chunks = chunks_of(input, splits);
    prop_assert_eq!(chunks.concat(), String::from_utf8_lossy(input));
    for chunk in &chunks {
        prop_assert!(
            ends_in_ground(chunk.as_bytes()),
            "a chunk ends inside an escape sequence: {:?} (chunks {:?})",
            chunk,
            chunks
        );
        if std::str::from_utf8(input).is_ok() {
            prop_assert!(
                !chunk.contains('\u{fffd}'),
                "a character was cut: {:?}",
                chunks
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_chunk_decodes_alone_and_leaves_a_terminal_in_its_ground_state(
        parts in proptest::collection::vec(part(), 0..12),
        splits in proptest::collection::vec(0usize..300, 0..8),
    ) {
        let input: Vec<u8> = parts.concat().into_bytes();
        let mut splits: Vec<usize> = splits.into_iter().map(|s| s.min(input.len())).collect();
        splits.sort();
        check(&input, &splits)?;
    }
}

/// Every split point of every sequence family, one at a time (what proptest may not hit).
#[test]
fn each_sequence_split_at_every_byte() {
    for sequence in SEQUENCES {
        let input = format!("a{sequence}b𝄞c");
        for split in 0..=input.len() {
            check(input.as_bytes(), &[split]).unwrap_or_else(|e| panic!("{sequence:?}: {e}"));
        }
    }
}

/// The cases the issue named: a CSI with an intermediate byte split before its final byte.
#[test]
fn a_csi_with_an_intermediate_byte_is_held_until_its_final_byte() {
    let mut chunker = Chunker::default();
    assert_eq!(chunker.push(b"x\x1b[2 "), "x");
    assert_eq!(chunker.push(b"q y"), "\x1b[2 q y");
    let mut chunker = Chunker::default();
    assert_eq!(chunker.push("é".as_bytes().split_at(1).0), "");
    assert_eq!(chunker.push("é".as_bytes().split_at(1).1), "é");
    let four = "𝄞".as_bytes();
    for cut in 1..4 {
        let mut chunker = Chunker::default();
        assert_eq!(chunker.push(&four[..cut]), "", "cut {cut}");
        assert_eq!(chunker.push(&four[cut..]), "𝄞", "cut {cut}");
    }
}
