//! The live-output coalescer's rules (`acp::stream`), with a fake clock and the documented
//! numbers written as literals: bounds from below as well as from above.

use std::time::{Duration, Instant};

use acp_bash::acp::stream::{cap_notice, Coalescer, StreamLimits};

const CAP: usize = 4 * 1024 * 1024;
const BATCH: usize = 64 * 1024;

/// Everything a flood makes the coalescer send: `chunks` of `size` bytes, all arriving within
/// one interval after the first (so they batch), then the end of output.
fn flood(chunk_size: usize, chunks: usize) -> (Vec<String>, Coalescer) {
    let t0 = Instant::now();
    let mut coalescer = Coalescer::new(StreamLimits::default());
    let chunk = "a".repeat(chunk_size);
    let mut sent = Vec::new();
    for i in 0..chunks {
        let now = t0 + Duration::from_nanos(i as u64);
        sent.extend(coalescer.push(&chunk, now));
        // The notice is the sequencer's to send after the data (never dropped).
        sent.extend(coalescer.take_notice());
    }
    sent.extend(coalescer.finish(t0 + Duration::from_millis(1)));
    sent.extend(coalescer.take_notice());
    (sent, coalescer)
}

/// The cap streams at least the cap less one batch and never more than the cap; the pending
/// batch goes out with the notice, once.
#[test]
fn the_cap_streams_between_the_cap_less_one_batch_and_the_cap() {
    for chunk_size in [7, 1000, 4096, 65_536] {
        let chunks = 5 * 1024 * 1024 / chunk_size;
        let (sent, coalescer) = flood(chunk_size, chunks);
        let all = sent.concat();
        let notice = cap_notice(&StreamLimits::default());
        assert_eq!(all.matches(&notice).count(), 1, "chunk size {chunk_size}");
        assert!(all.ends_with(&notice), "the notice comes last");
        let streamed = all.len() - notice.len();
        assert!(streamed <= CAP, "{streamed} > the cap ({chunk_size})");
        assert!(
            streamed >= CAP - BATCH,
            "only {streamed} bytes streamed before the cap (chunk size {chunk_size})"
        );
        // Whole chunks only: the most that fits.
        assert_eq!(streamed, CAP / chunk_size * chunk_size, "{chunk_size}");
        assert!(coalescer.capped());
        assert_eq!(
            coalescer.dropped_bytes(),
            (chunks * chunk_size - streamed) as u64
        );
    }
}

/// Below the cap nothing is capped, and a batch that fills up goes out without waiting.
#[test]
fn just_below_the_cap_everything_streams() {
    let (sent, coalescer) = flood(1024, CAP / 1024);
    assert_eq!(sent.concat().len(), CAP);
    assert!(!coalescer.capped());
    assert_eq!(coalescer.dropped_bytes(), 0);
    // First chunk at once, then full batches of 64 KiB, then what is left at the end.
    assert_eq!(sent[0].len(), 1024);
    for batch in &sent[1..sent.len() - 1] {
        assert_eq!(batch.len(), BATCH);
    }
}

/// A steady flood over one second is sent as one update per 20 ms interval: at most ~50 a
/// second, and at least that many (the batch is not held longer than the interval).
#[test]
fn a_steady_flood_is_sent_every_interval_no_less_and_no_more() {
    let t0 = Instant::now();
    let mut coalescer = Coalescer::new(StreamLimits::default());
    let mut updates = Vec::new();
    for i in 0..10_000u64 {
        let now = t0 + Duration::from_micros(i * 100);
        updates.extend(coalescer.push("0123456789", now).map(|d| (now, d)));
        updates.extend(coalescer.poll(now).map(|d| (now, d)));
    }
    let end = t0 + Duration::from_secs(1);
    updates.extend(coalescer.finish(end).map(|d| (end, d)));
    assert_eq!(updates.iter().map(|(_, d)| d.len()).sum::<usize>(), 100_000);
    assert!(
        (50..=52).contains(&updates.len()),
        "{} updates in one second",
        updates.len()
    );
    for pair in updates.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(gap >= Duration::from_millis(20), "{gap:?} between updates");
        assert!(gap <= Duration::from_millis(21), "a batch waited {gap:?}");
    }
}

/// The first chunk, and any chunk after a quiet interval, go out at once; a chunk inside the
/// interval waits exactly until the interval has passed.
#[test]
fn the_interval_is_20_ms_exactly() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut c = Coalescer::new(StreamLimits::default());
    assert_eq!(c.push("a", t0).as_deref(), Some("a"));
    assert_eq!(c.push("b", t0 + ms(19)), None);
    assert_eq!(c.deadline(), Some(t0 + ms(20)));
    assert_eq!(c.poll(t0 + ms(20) - Duration::from_nanos(1)), None);
    assert_eq!(c.poll(t0 + ms(20)).as_deref(), Some("b"));
    assert_eq!(c.push("c", t0 + ms(40)).as_deref(), Some("c"));
    assert_eq!(c.push("d", t0 + ms(59)), None);
    assert_eq!(c.finish(t0 + ms(59)).as_deref(), Some("d"));
}
