//! Live output: turns the engine's stream of output chunks into a reasonable number of updates,
//! `terminal_output` appends for Zed's card ([`Coalescer`]) and, for every other client, a
//! console view of the last lines that replaces the previous one ([`LiveConsole`]). [`Live`]
//! picks one per call.
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
//! - After [`StreamLimits::max_streamed_bytes`] the call stops streaming; a notice says so
//!   ([`cap_notice`]: the result keeps only the output's head and tail), and once the command
//!   has ended a second one says where the full output is ([`ended_notice`]: the log).
//!
//! The console view (clients without the card) follows its own rules, since each update
//! re-sends the whole view: the first goes out [`PlainLive::first_delay`] after the first output
//! (a command that ends sooner gets only its final update), the next ones at most every
//! [`PlainLive::interval`], and only when the output changed; each shows the last lines only
//! ([`LiveBounds`]).

use std::time::{Duration, Instant};

use crate::present::live::{LiveBounds, OutputTail};

/// The knobs of the coalescer. [`StreamLimits::default`] is what the agent uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StreamLimits {
    /// The shortest gap between two updates of one call (20 ms: at most ~50 updates a second).
    pub min_interval: Duration,
    /// A batch this large goes out without waiting for `min_interval` (64 KiB), so no single
    /// update grows without bound.
    pub max_batch_bytes: usize,
    /// How many bytes of one call's output are streamed to the card (4 MiB).
    pub max_streamed_bytes: usize,
    /// The live console view for clients without the card; `None` turns it off (they then get
    /// only the final update, `--plain-live off`).
    pub plain_live: Option<PlainLive>,
}

impl Default for StreamLimits {
    fn default() -> Self {
        StreamLimits {
            min_interval: Duration::from_millis(20),
            max_batch_bytes: 64 * 1024,
            max_streamed_bytes: 4 * 1024 * 1024,
            plain_live: Some(PlainLive::default()),
        }
    }
}

/// The knobs of the live console view ([`LiveConsole`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlainLive {
    /// How long after the first output the first view goes out (80 ms: soon enough to feel live,
    /// late enough that a quick command gets only its final update).
    pub first_delay: Duration,
    /// The shortest gap between two views (300 ms: about 3 a second, each a few KiB).
    pub interval: Duration,
    /// How much of the output a view shows.
    pub bounds: LiveBounds,
}

impl Default for PlainLive {
    fn default() -> Self {
        PlainLive {
            first_delay: Duration::from_millis(80),
            interval: Duration::from_millis(300),
            bounds: LiveBounds::default(),
        }
    }
}

/// Per-call state of the live console view: the output's tail and when the last view went out.
/// Feed it with [`LiveConsole::push`], [`LiveConsole::poll`] it when [`LiveConsole::deadline`]
/// passes; each `Some` is a whole ```` ```console ```` block that replaces the previous one.
/// When the output ends there is nothing to flush: the final update shows the result.
#[derive(Debug)]
#[non_exhaustive]
pub struct LiveConsole {
    settings: PlainLive,
    echo: String,
    tail: OutputTail,
    first_output: Option<Instant>,
    last_sent: Option<Instant>,
    changed: bool,
}

impl LiveConsole {
    /// A view that starts with `echo` (a multi-line script's `$ ` lines, see
    /// [`crate::present::CallView::echo`]).
    pub fn new(settings: PlainLive, echo: &str) -> Self {
        LiveConsole {
            settings,
            echo: echo.to_string(),
            tail: OutputTail::for_bounds(settings.bounds),
            first_output: None,
            last_sent: None,
            changed: false,
        }
    }

    /// Adds one chunk of output. Returns the view to send now, if one is due.
    pub fn push(&mut self, chunk: &str, now: Instant) -> Option<String> {
        if chunk.is_empty() {
            return None;
        }
        self.tail.push(chunk);
        self.first_output.get_or_insert(now);
        self.changed = true;
        self.poll(now)
    }

    /// When the next view is due, if the output changed since the last one.
    pub fn deadline(&self) -> Option<Instant> {
        if !self.changed {
            return None;
        }
        match self.last_sent {
            Some(last) => Some(last + self.settings.interval),
            None => self
                .first_output
                .map(|first| first + self.settings.first_delay),
        }
    }

    /// The view, if it is due.
    pub fn poll(&mut self, now: Instant) -> Option<String> {
        match self.deadline() {
            Some(deadline) if deadline <= now => {
                self.last_sent = Some(now);
                self.changed = false;
                Some(self.tail.console(&self.echo, self.settings.bounds))
            }
            _ => None,
        }
    }
}

/// One live update of a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LiveUpdate {
    /// Output to append to the terminal card (`_meta.terminal_output`).
    Append(String),
    /// A console block that replaces what the call showed (the description stays above it).
    Replace(String),
}

/// The live output of one call, in the form the client can show.
#[derive(Debug)]
pub enum Live {
    /// Zed's terminal card: every chunk, coalesced and capped.
    Card(Coalescer),
    /// Other clients: a throttled console view of the last lines.
    Console(LiveConsole),
    /// No live output (a client without the card, with `--plain-live off`).
    Off,
}

impl Live {
    /// The live output for a call whose client does (`card`) or does not render the terminal
    /// card; `echo` is the call's [`crate::present::CallView::echo`].
    pub fn new(card: bool, limits: StreamLimits, echo: &str) -> Self {
        match (card, limits.plain_live) {
            (true, _) => Live::Card(Coalescer::new(limits)),
            (false, Some(settings)) => Live::Console(LiveConsole::new(settings, echo)),
            (false, None) => Live::Off,
        }
    }

    /// Whether output chunks are wanted at all, and how many bytes of them (the card stops at its
    /// cap; the console view keeps only a tail, so it takes everything).
    pub fn wanted_bytes(&self, limits: &StreamLimits) -> usize {
        match self {
            Live::Card(_) => limits.max_streamed_bytes,
            Live::Console(_) => usize::MAX,
            Live::Off => 0,
        }
    }

    /// [`Live::wanted_bytes`] of the live output [`Live::new`] would make for `card`.
    pub fn wanted_bytes_for(card: bool, limits: &StreamLimits) -> usize {
        match (card, limits.plain_live) {
            (true, _) => limits.max_streamed_bytes,
            (false, Some(_)) => usize::MAX,
            (false, None) => 0,
        }
    }

    /// Adds one chunk of output; returns the update to send now, if any.
    pub fn push(&mut self, chunk: &str, now: Instant) -> Option<LiveUpdate> {
        match self {
            Live::Card(coalescer) => coalescer.push(chunk, now).map(LiveUpdate::Append),
            Live::Console(console) => console.push(chunk, now).map(LiveUpdate::Replace),
            Live::Off => None,
        }
    }

    /// When the waiting update must go out, if there is one.
    pub fn deadline(&self) -> Option<Instant> {
        match self {
            Live::Card(coalescer) => coalescer.deadline(),
            Live::Console(console) => console.deadline(),
            Live::Off => None,
        }
    }

    /// The waiting update, if its deadline has passed.
    pub fn poll(&mut self, now: Instant) -> Option<LiveUpdate> {
        match self {
            Live::Card(coalescer) => coalescer.poll(now).map(LiveUpdate::Append),
            Live::Console(console) => console.poll(now).map(LiveUpdate::Replace),
            Live::Off => None,
        }
    }

    /// The output ended: the card gets what still waits; a console view is superseded by the
    /// final update, so it sends nothing.
    pub fn finish(&mut self, now: Instant) -> Option<LiveUpdate> {
        match self {
            Live::Card(coalescer) => coalescer.finish(now).map(LiveUpdate::Append),
            Live::Console(_) | Live::Off => None,
        }
    }

    /// Whether the card's stream hit its cap.
    pub fn capped(&self) -> bool {
        matches!(self, Live::Card(coalescer) if coalescer.capped())
    }

    /// The card's cap notice, once, after the update that hit the cap ([`Coalescer::take_notice`]).
    pub fn take_notice(&mut self) -> Option<String> {
        match self {
            Live::Card(coalescer) => coalescer.take_notice(),
            Live::Console(_) | Live::Off => None,
        }
    }
}

/// The line the card shows when a call's streamed output reached the cap.
///
/// It ends with `\r\n`; the call's sequencer puts it on a line of its own (it starts it with
/// `\r\n` when what the card shows so far does not end a line). It says what is true at that
/// moment: the result keeps only the head and tail of the output, and where the whole output
/// is ([`ended_notice`]) is known only once the command has ended.
pub fn cap_notice(limits: &StreamLimits) -> String {
    format!(
        "[acp-bash: stopped streaming after {}; the result keeps only the head and tail of the \
         output; where the full output is follows when the command ends]\r\n",
        human_bytes(limits.max_streamed_bytes)
    )
}

/// The line that follows [`cap_notice`] once the command has ended: where the full output is,
/// from the run's [`Truncation`] (the log file; a log that reached its own cap; no log at all;
/// or nothing cut from the result). Ends with `\r\n`, starts a line like [`cap_notice`].
pub fn ended_notice(truncation: Option<&Truncation>) -> String {
    let said = match truncation {
        None => "the result holds the whole output".to_string(),
        Some(Truncation {
            full_output: Some(path),
            log_holds_first: None,
            ..
        }) => format!("full output: {path}"),
        Some(Truncation {
            full_output: Some(path),
            log_holds_first: Some(bytes),
            ..
        }) => format!(
            "the log holds only the first {} of the output: {path}",
            human_bytes(usize::try_from(*bytes).unwrap_or(usize::MAX))
        ),
        Some(Truncation {
            full_output: None, ..
        }) => "the full output was not saved (no log); the result keeps only its head and tail"
            .to_string(),
    };
    format!("[acp-bash: {said}]\r\n")
}

/// The line that follows [`cap_notice`] once the command has ended and the engine saved its whole
/// output to `path`: where to read what the card does not show ([`ended_notice`] for a log that
/// holds all of it).
pub fn full_output_notice(path: &str) -> String {
    ended_notice(Some(&Truncation::new(0, Some(path.to_string()))))
}

use crate::exec::Truncation;
use crate::text::human_bytes;

/// Per-call coalescing state. Feed it chunks with [`Coalescer::push`], flush it when
/// [`Coalescer::deadline`] passes, and [`Coalescer::finish`] it when the output ends.
#[derive(Debug)]
#[non_exhaustive]
pub struct Coalescer {
    limits: StreamLimits,
    pending: String,
    last_sent: Option<Instant>,
    streamed_bytes: usize,
    capped: bool,
    /// The cap was hit and [`cap_notice`] has not been taken yet.
    notice_due: bool,
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
            notice_due: false,
            dropped_bytes: 0,
        }
    }

    /// Adds one chunk of output. Returns the data to send now, if any. The chunk that would
    /// cross the cap is kept out whole; what waited goes out, and [`Coalescer::take_notice`]
    /// then has the notice.
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
            self.notice_due = true;
            self.dropped_bytes += chunk.len() as u64;
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

    /// The cap notice, once, after the cap was hit (to send after the data, never dropped: it is
    /// not live output but the card's account of it).
    pub fn take_notice(&mut self) -> Option<String> {
        std::mem::take(&mut self.notice_due).then(|| cap_notice(&self.limits))
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
        self.streamed_bytes += data.len();
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
        // 6 + 6 > 10: the second chunk is kept out whole, and the notice is due.
        assert_eq!(c.push("é\x1b[31m", t0 + ms(100)), None);
        assert!(c.capped());
        let notice = c.take_notice().unwrap();
        assert_eq!(notice, cap_notice(&limits));
        assert!(notice.contains("stopped streaming after 10 bytes"));
        assert_eq!(c.take_notice(), None, "once");
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

    fn console(echo: &str) -> LiveConsole {
        LiveConsole::new(PlainLive::default(), echo)
    }

    #[test]
    fn the_first_console_view_waits_a_little_for_more_output() {
        let t0 = Instant::now();
        let mut c = console("");
        assert_eq!(c.deadline(), None, "nothing to show before any output");
        assert_eq!(c.push("one\n", t0), None);
        assert_eq!(c.push("two\n", t0 + ms(10)), None);
        assert_eq!(c.deadline(), Some(t0 + ms(80)));
        assert_eq!(c.poll(t0 + ms(79)), None);
        assert_eq!(
            c.poll(t0 + ms(80)).as_deref(),
            Some("```console\none\ntwo\n```")
        );
        assert_eq!(c.deadline(), None, "nothing new, nothing due");
    }

    #[test]
    fn console_views_follow_at_the_interval_and_only_when_the_output_changed() {
        let t0 = Instant::now();
        let mut c = console("$ a\n$ b\n");
        c.push("1\n", t0);
        assert!(c.poll(t0 + ms(80)).is_some());
        assert_eq!(c.push("2\n", t0 + ms(100)), None);
        assert_eq!(c.deadline(), Some(t0 + ms(380)));
        assert_eq!(
            c.push("3\n", t0 + ms(400)).as_deref(),
            Some("```console\n$ a\n$ b\n1\n2\n3\n```")
        );
        assert_eq!(c.poll(t0 + ms(2000)), None);
    }

    #[test]
    fn a_flood_becomes_about_three_console_views_a_second_of_a_few_kib() {
        let t0 = Instant::now();
        let mut c = console("");
        let mut views = Vec::new();
        // 100,000 lines over ten seconds, polled after each line.
        for i in 0..100_000u64 {
            let now = t0 + Duration::from_micros(i * 100);
            views.extend(c.push(&format!("line {i}\n"), now));
            views.extend(c.poll(now));
        }
        assert!((30..=35).contains(&views.len()), "{} views", views.len());
        assert!(views.iter().all(|v| v.len() <= 4 * 1024), "bounded views");
        let last = c
            .poll(t0 + Duration::from_secs(11))
            .expect("the last lines are due");
        assert!(last.ends_with("line 99999\n```"), "{last}");
    }

    #[test]
    fn live_picks_the_card_the_console_view_or_nothing() {
        let limits = StreamLimits::default();
        let t0 = Instant::now();
        let mut card = Live::new(true, limits, "$ x\n");
        assert_eq!(card.push("a", t0), Some(LiveUpdate::Append("a".into())));
        assert_eq!(card.wanted_bytes(&limits), limits.max_streamed_bytes);
        let mut plain = Live::new(false, limits, "");
        assert_eq!(plain.push("a\n", t0), None);
        assert_eq!(
            plain.poll(t0 + ms(80)),
            Some(LiveUpdate::Replace("```console\na\n```".into()))
        );
        assert_eq!(plain.finish(t0 + ms(90)), None);
        let off = StreamLimits {
            plain_live: None,
            ..limits
        };
        let mut none = Live::new(false, off, "");
        assert_eq!(none.wanted_bytes(&off), 0);
        assert_eq!(none.push("a\n", t0), None);
        assert_eq!(none.deadline(), None);
    }

    #[test]
    fn default_cap_reads_in_mebibytes() {
        assert!(cap_notice(&StreamLimits::default()).contains("after 4 MiB"));
    }

    #[test]
    fn sizes_read_in_the_largest_unit_that_divides_them() {
        for (bytes, text) in [
            (0, "0 bytes"),
            (1000, "1000 bytes"),
            (1024, "1 KiB"),
            (1536, "1536 bytes"),
            (1536 * 1024, "1536 KiB"),
            (4 << 20, "4 MiB"),
            ((4 << 20) + 1, "4194305 bytes"),
        ] {
            assert_eq!(human_bytes(bytes), text, "{bytes}");
        }
    }
}
