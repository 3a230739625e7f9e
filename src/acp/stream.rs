//! The live output coalescer: turns the engine's stream of output chunks into a reasonable number
//! of `terminal_output` updates.
//!
//! Owns: when a chunk is sent (at once, or batched with the next ones), and how much of a call's
//! output is streamed at all. Must not touch: the chunks' contents (they arrive cut at safe
//! boundaries, never inside a UTF-8 character or an escape sequence, and are never split here),
//! the wire format, the clock (time is passed in, so the rules are unit-tested without sleeping).
//!
//! The rules:
//! - A chunk that arrives when nothing was sent for [`StreamLimits::min_interval`] goes out at once:
//!   a slow command's first line reaches the client without delay.
//! - Otherwise it waits in a batch that goes out [`StreamLimits::min_interval`] after the previous
//!   update (or sooner, once the batch holds [`StreamLimits::max_batch_bytes`]): a flood becomes at
//!   most about 1 s / `min_interval` updates per second, not thousands of tiny ones.
//! - After [`StreamLimits::max_streamed_bytes`] the call stops streaming; one last update says so
//!   ([`cap_notice`]), and the full output stays in the result (and the engine's log).

use std::time::{Duration, Instant};

/// The knobs of the coalescer. [`StreamLimits::default`] is what the agent uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// The shortest gap between two updates of one call (20 ms: at most ~50 updates a second).
    pub min_interval: Duration,
    /// A batch this large goes out without waiting for `min_interval` (64 KiB), so no single
    /// update grows without bound.
    pub max_batch_bytes: usize,
    /// How many bytes of one call's output are streamed to the card (4 MiB).
    pub max_streamed_bytes: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            min_interval: Duration::from_millis(20),
            max_batch_bytes: 64 * 1024,
            max_streamed_bytes: 4 * 1024 * 1024,
        }
    }
}

/// The line the card shows when a call's streamed output reached the cap.
///
/// It starts with `\r\n` so that it stands on a line of its own in the terminal emulator, whatever
/// the command printed last.
pub fn cap_notice(limits: &StreamLimits) -> String {
    format!(
        "\r\n[acp-bash: stopped streaming after {}; the full output is in the result and the log]\r\n",
        human_bytes(limits.max_streamed_bytes)
    )
}

/// The line that follows [`cap_notice`] once the command has ended and the engine saved its whole
/// output to `path`: where to read what the card does not show.
pub fn full_output_notice(path: &str) -> String {
    format!("[acp-bash: full output: {path}]\r\n")
}

fn human_bytes(bytes: usize) -> String {
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

/// Per-call coalescing state. Feed it chunks with [`Coalescer::push`], flush it when
/// [`Coalescer::deadline`] passes, and [`Coalescer::finish`] it when the output ends.
#[derive(Debug)]
pub struct Coalescer {
    limits: StreamLimits,
    pending: String,
    last_sent: Option<Instant>,
    streamed_bytes: usize,
    capped: bool,
    dropped_bytes: u64,
}

impl Coalescer {
    /// A coalescer for one call, with nothing sent yet.
    pub fn new(limits: StreamLimits) -> Self {
        Coalescer {
            limits,
            pending: String::new(),
            last_sent: None,
            streamed_bytes: 0,
            capped: false,
            dropped_bytes: 0,
        }
    }

    /// Adds one chunk of output. Returns the data to send now, if any.
    pub fn push(&mut self, chunk: &str, now: Instant) -> Option<String> {
        if chunk.is_empty() {
            return None;
        }
        if self.capped {
            self.dropped_bytes += chunk.len() as u64;
            return None;
        }
        if self.streamed_bytes + self.pending.len() + chunk.len() > self.limits.max_streamed_bytes {
            // Chunks are never split: the whole chunk that would cross the cap stays out of the
            // card, and the card says why instead.
            self.capped = true;
            self.dropped_bytes += chunk.len() as u64;
            self.pending.push_str(&cap_notice(&self.limits));
            return self.take(now);
        }
        self.pending.push_str(chunk);
        let quiet = match self.last_sent {
            None => true,
            Some(last) => now.saturating_duration_since(last) >= self.limits.min_interval,
        };
        if quiet || self.pending.len() >= self.limits.max_batch_bytes {
            self.take(now)
        } else {
            None
        }
    }

    /// When the waiting batch must go out, if there is one.
    pub fn deadline(&self) -> Option<Instant> {
        if self.pending.is_empty() {
            return None;
        }
        Some(match self.last_sent {
            Some(last) => last + self.limits.min_interval,
            None => Instant::now(),
        })
    }

    /// Sends the waiting batch if its deadline has passed.
    pub fn poll(&mut self, now: Instant) -> Option<String> {
        match self.deadline() {
            Some(deadline) if deadline <= now => self.take(now),
            _ => None,
        }
    }

    /// The output ended: whatever is still waiting goes out now.
    pub fn finish(&mut self, now: Instant) -> Option<String> {
        self.take(now)
    }

    /// Whether the cap was hit.
    pub fn capped(&self) -> bool {
        self.capped
    }

    /// Bytes of output kept out of the card because of the cap.
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped_bytes
    }

    fn take(&mut self, now: Instant) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        self.last_sent = Some(now);
        let data = std::mem::take(&mut self.pending);
        if !self.capped {
            self.streamed_bytes += data.len();
        }
        Some(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn first_chunk_goes_out_at_once() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(StreamLimits::default());
        assert_eq!(c.push("hello\n", t0).as_deref(), Some("hello\n"));
        assert_eq!(c.deadline(), None);
    }

    #[test]
    fn a_chunk_after_a_quiet_gap_goes_out_at_once() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(StreamLimits::default());
        c.push("a\n", t0);
        assert_eq!(c.push("b\n", t0 + ms(500)).as_deref(), Some("b\n"));
    }

    #[test]
    fn chunks_close_together_are_batched_until_the_interval_passes() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(StreamLimits::default());
        assert!(c.push("1", t0).is_some());
        assert_eq!(c.push("2", t0 + ms(1)), None);
        assert_eq!(c.push("3", t0 + ms(2)), None);
        assert_eq!(c.deadline(), Some(t0 + ms(20)));
        assert_eq!(c.poll(t0 + ms(19)), None);
        assert_eq!(c.poll(t0 + ms(20)).as_deref(), Some("23"));
        assert_eq!(c.deadline(), None);
    }

    #[test]
    fn a_flood_becomes_at_most_fifty_updates_a_second() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(StreamLimits::default());
        let mut updates = 0;
        let mut total = 0;
        // 10,000 chunks of 10 bytes over one second, polled after each chunk.
        for i in 0..10_000u64 {
            let now = t0 + Duration::from_micros(i * 100);
            updates += c
                .push("0123456789", now)
                .map(|d| total += d.len())
                .is_some() as usize;
            updates += c.poll(now).map(|d| total += d.len()).is_some() as usize;
        }
        updates += c.finish(t0 + ms(1000)).map(|d| total += d.len()).is_some() as usize;
        assert_eq!(total, 100_000, "nothing lost");
        assert!(updates <= 52, "{updates} updates");
    }

    #[test]
    fn a_large_batch_goes_out_without_waiting() {
        let t0 = Instant::now();
        let limits = StreamLimits {
            max_batch_bytes: 10,
            ..StreamLimits::default()
        };
        let mut c = Coalescer::new(limits);
        c.push("x", t0);
        assert_eq!(c.push("abcde", t0 + ms(1)), None);
        assert_eq!(c.push("fghij", t0 + ms(2)).as_deref(), Some("abcdefghij"));
    }

    #[test]
    fn chunks_are_never_split_and_the_cap_is_announced_once() {
        let t0 = Instant::now();
        let limits = StreamLimits {
            max_streamed_bytes: 10,
            ..StreamLimits::default()
        };
        let mut c = Coalescer::new(limits);
        assert_eq!(c.push("123456", t0).as_deref(), Some("123456"));
        // 6 + 6 > 10: the second chunk is kept out whole, and the notice goes out.
        let sent = c.push("é\x1b[31m", t0 + ms(100)).unwrap();
        assert_eq!(sent, cap_notice(&limits));
        assert!(sent.contains("stopped streaming after 10 bytes"));
        assert!(c.capped());
        assert_eq!(c.push("more", t0 + ms(200)), None);
        assert_eq!(c.finish(t0 + ms(300)), None);
        assert_eq!(c.dropped_bytes(), 7 + 4);
    }

    #[test]
    fn finish_sends_what_waits() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(StreamLimits::default());
        c.push("a", t0);
        c.push("b", t0 + ms(1));
        assert_eq!(c.finish(t0 + ms(2)).as_deref(), Some("b"));
        assert_eq!(c.finish(t0 + ms(3)), None);
    }

    #[test]
    fn default_cap_reads_in_mebibytes() {
        assert!(cap_notice(&StreamLimits::default()).contains("after 4 MiB"));
    }
}
