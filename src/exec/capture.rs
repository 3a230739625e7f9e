//! Keeps a bounded copy of a run's output for its result: all of it when it is small, else the
//! first and last bytes around a gap line, with the full output written to a log file.
//!
//! Owns: the memory bound and the log file, with its cap ([`LogLimits`]: a log stops at
//! `max_bytes`, and the truncation then says it holds only the first part). Must not touch:
//! chunking for live streaming (see [`super::chunk`]), status markers, the log directory's
//! rules (see [`super::logdir`]).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::chunk::{utf8_safe_end, utf8_safe_start};
use super::status::Truncation;

/// The log's write buffer (see [`Capture::open_log`]).
const LOG_BUFFER_BYTES: usize = 32 * 1024;

/// Where logs go and how large they may grow.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LogLimits {
    /// The directory the logs are written to.
    pub dir: PathBuf,
    /// One log stops at this many bytes.
    pub max_bytes: u64,
    /// The logs in `dir` together (the oldest are removed first).
    pub budget_bytes: u64,
    /// Free space on the disk that a log never eats into (`None`: [`super::logdir::default_reserve`]).
    pub disk_reserve: Option<u64>,
}

impl LogLimits {
    /// The engine's defaults in `dir`.
    pub fn in_dir(dir: &Path) -> LogLimits {
        LogLimits {
            dir: dir.to_path_buf(),
            max_bytes: u64::MAX,
            budget_bytes: u64::MAX,
            disk_reserve: Some(0),
        }
    }
}

/// A bounded copy of the output, spilling to a log file once it no longer fits.
#[non_exhaustive]
pub struct Capture {
    head: Vec<u8>,
    head_limit: usize,
    /// The newest bytes; trimmed to `tail_limit` whenever it grows past twice that.
    tail: Vec<u8>,
    tail_limit: usize,
    total: u64,
    limits: LogLimits,
    log: LogState,
}

enum LogState {
    /// Nothing was dropped yet, so no log is needed.
    NotNeeded,
    Writing {
        path: PathBuf,
        file: BufWriter<File>,
        written: u64,
        cap: u64,
    },
    /// The log reached its cap and was closed: it holds the first `written` bytes.
    Capped {
        path: PathBuf,
        written: u64,
        flushed: Result<(), String>,
    },
    /// Opening or writing the log failed (why); the result says the full output was not kept.
    Failed(String),
}

/// What [`Capture::finish`] hands back.
#[non_exhaustive]
pub struct Captured {
    /// The text for the result: everything, or head + gap line + tail.
    pub text: String,
    /// Set when the middle was dropped.
    pub truncation: Option<Truncation>,
    /// Why the full log could not be written, if it could not.
    pub log_error: Option<String>,
}

impl Capture {
    /// Keeps `head_limit` bytes from the start and `tail_limit` from the end; the full output
    /// goes to a log in `log_dir` (uncapped) once it is too large.
    pub fn new(head_limit: usize, tail_limit: usize, log_dir: &Path) -> Self {
        Capture::with_log_limits(head_limit, tail_limit, LogLimits::in_dir(log_dir))
    }

    /// Like [`Capture::new`], with the log's place, cap and budget given by `limits`.
    pub fn with_log_limits(head_limit: usize, tail_limit: usize, limits: LogLimits) -> Self {
        Capture {
            head: Vec::new(),
            head_limit,
            tail: Vec::new(),
            tail_limit,
            total: 0,
            limits,
            log: LogState::NotNeeded,
        }
    }

    /// Adds output.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        // The head never grows past its limit: once it is full, `take` is 0.
        let take = bytes.len().min(self.head_limit - self.head.len());
        self.head.extend_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        if bytes.is_empty() {
            return;
        }
        match &mut self.log {
            LogState::NotNeeded => {
                self.tail.extend_from_slice(bytes);
                if self.tail.len() > self.tail_window() {
                    self.open_log();
                    let excess = self.tail.len() - self.tail_limit;
                    self.tail.drain(..excess);
                }
            }
            LogState::Writing { .. } => {
                self.write_log(bytes);
                self.keep_tail(bytes);
            }
            LogState::Capped { .. } | LogState::Failed(_) => self.keep_tail(bytes),
        }
    }

    /// How long `tail` may grow before it is trimmed back to `tail_limit`.
    fn tail_window(&self) -> usize {
        self.tail_limit.saturating_mul(2).max(1)
    }

    /// Once output is being dropped: keeps (at least) the last `tail_limit` bytes of the tail
    /// followed by `bytes`, copying only what can still end up in the result. A piece at least
    /// `tail_limit` long replaces the tail outright (a 64 KiB read copies 32 KiB, instead of
    /// 64 KiB plus a 32 KiB memmove); shorter pieces append, and the tail is trimmed when it
    /// would pass twice the limit, as before.
    fn keep_tail(&mut self, bytes: &[u8]) {
        let limit = self.tail_limit;
        if bytes.len() >= limit {
            self.tail.clear();
            self.tail.extend_from_slice(&bytes[bytes.len() - limit..]);
            return;
        }
        if self.tail.len() + bytes.len() > self.tail_window() {
            // Here bytes.len() < limit, so the excess is within the tail.
            let excess = self.tail.len() + bytes.len() - limit;
            self.tail.drain(..excess);
        }
        self.tail.extend_from_slice(bytes);
    }

    /// Starts the log with everything seen so far (nothing was dropped before this point).
    fn open_log(&mut self) {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        let limits = &self.limits;
        let path = limits
            .dir
            .join(format!("run-{stamp}-{}-{n}.log", std::process::id()));
        let opened = super::logdir::LogDir::open(&limits.dir).and_then(|dir| {
            dir.make_room(limits.budget_bytes, limits.max_bytes);
            let cap = dir.disk_room(limits.disk_reserve)?.min(limits.max_bytes);
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let file = dir
                .create_log(name)
                .map_err(|error| format!("cannot create {}: {error}", path.display()))?;
            // Pieces at least this long (a busy pipe's 64 KiB reads) go straight to the
            // file, without a copy into the buffer; shorter ones are batched.
            let file = BufWriter::with_capacity(LOG_BUFFER_BYTES, file);
            Ok((file, cap))
        });
        self.log = match opened {
            Ok((file, cap)) => LogState::Writing {
                path,
                file,
                written: 0,
                cap,
            },
            Err(reason) => LogState::Failed(reason),
        };
        // Everything seen so far goes in first (through the cap, like the rest).
        let head = std::mem::take(&mut self.head);
        self.write_log(&head);
        self.head = head;
        let tail = std::mem::take(&mut self.tail);
        self.write_log(&tail);
        self.tail = tail;
    }

    /// Writes `bytes` to the log, as far as its cap allows; at the cap the log is closed.
    fn write_log(&mut self, bytes: &[u8]) {
        let LogState::Writing {
            file,
            path,
            written,
            cap,
        } = &mut self.log
        else {
            return;
        };
        let room = (*cap - *written).min(bytes.len() as u64) as usize;
        if let Err(error) = file.write_all(&bytes[..room]) {
            self.log = LogState::Failed(format!("writing {} failed: {error}", path.display()));
            return;
        }
        *written += room as u64;
        if room < bytes.len() {
            let flushed = file
                .flush()
                .map_err(|error| format!("writing {} failed: {error}", path.display()));
            self.log = LogState::Capped {
                path: std::mem::take(path),
                written: *written,
                flushed,
            };
        }
    }

    /// The kept text, and how much was dropped.
    pub fn finish(self) -> Captured {
        // Without a log nothing was dropped: the tail is only trimmed once the log is opened.
        if matches!(self.log, LogState::NotNeeded) {
            let mut all = self.head;
            all.extend_from_slice(&self.tail);
            return Captured {
                text: String::from_utf8_lossy(&all).into_owned(),
                truncation: None,
                log_error: None,
            };
        }
        // Cut both sides on character boundaries and keep only `tail_limit` bytes of the tail.
        let tail_from = self.tail.len().saturating_sub(self.tail_limit);
        let tail = &self.tail[tail_from..];
        let tail = &tail[utf8_safe_start(tail)..];
        let head = &self.head[..utf8_safe_end(&self.head)];
        let dropped_bytes = self.total - (head.len() + tail.len()) as u64;
        let (full_output, log_holds_first, log_error) = match self.log {
            LogState::Writing { path, mut file, .. } => match file.flush() {
                Ok(()) => (Some(path.to_string_lossy().into_owned()), None, None),
                Err(error) => (
                    None,
                    None,
                    Some(format!("writing {} failed: {error}", path.display())),
                ),
            },
            LogState::Capped {
                path,
                written,
                flushed: Ok(()),
            } => (
                Some(path.to_string_lossy().into_owned()),
                Some(written),
                None,
            ),
            LogState::Capped {
                flushed: Err(error),
                ..
            } => (None, None, Some(error)),
            LogState::Failed(reason) => (None, None, Some(reason)),
            LogState::NotNeeded => (None, None, None),
        };
        let mut text = String::from_utf8_lossy(head).into_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[… {dropped_bytes} bytes of output dropped here …]\n"
        ));
        text.push_str(&String::from_utf8_lossy(tail));
        Captured {
            text,
            truncation: Some(Truncation {
                dropped_bytes,
                full_output,
                log_holds_first,
            }),
            log_error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole_and_writes_no_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut capture = Capture::new(8, 8, &dir.path().join("logs"));
        capture.push(b"hello ");
        capture.push(b"world\n");
        let captured = capture.finish();
        assert_eq!(captured.text, "hello world\n");
        assert_eq!(captured.truncation, None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn large_output_keeps_head_and_tail_and_logs_everything() {
        let dir = tempfile::tempdir().unwrap();
        let mut capture = Capture::new(4, 4, &dir.path().join("logs"));
        let input: Vec<u8> = (0..1000).map(|i| b'a' + (i % 26) as u8).collect();
        for piece in input.chunks(7) {
            capture.push(piece);
        }
        let captured = capture.finish();
        assert_eq!(captured.log_error, None);
        let truncation = captured.truncation.unwrap();
        assert_eq!(truncation.dropped_bytes, 992);
        assert_eq!(
            captured.text,
            "abcd\n[… 992 bytes of output dropped here …]\nijkl"
        );
        let log = std::fs::read(truncation.full_output.unwrap()).unwrap();
        assert_eq!(log, input);
    }

    /// The memory bound: however the output arrives (byte by byte, in pieces just under the tail
    /// limit, or larger), the tail never holds more than twice its limit, in every log state
    /// (written, capped at once, or never opened because the log directory can't be made).
    #[test]
    fn the_tail_stays_under_twice_its_limit_while_output_streams() {
        let dir = tempfile::tempdir().unwrap();
        let blocked = dir.path().join("a-file");
        std::fs::write(&blocked, "").unwrap();
        let places = [
            LogLimits::in_dir(&dir.path().join("logs")),
            LogLimits {
                max_bytes: 0,
                ..LogLimits::in_dir(&dir.path().join("capped"))
            },
            LogLimits::in_dir(&blocked.join("logs")),
        ];
        for limits in places {
            let (head, tail) = (16, 64);
            let mut capture = Capture::with_log_limits(head, tail, limits);
            let input: Vec<u8> = (0..20_000u32).map(|i| b'a' + (i % 26) as u8).collect();
            let mut sizes = vec![1, 1, tail - 1, 3, 1, tail, 1, 2 * tail + 5];
            sizes.extend([1; 3 * 64]); // a long run of single bytes

            let mut start = 0;
            for size in sizes.iter().cycle() {
                let end = (start + size).min(input.len());
                capture.push(&input[start..end]);
                assert!(
                    capture.tail.len() <= capture.tail_window(),
                    "{} bytes of tail after {end} bytes",
                    capture.tail.len()
                );
                start = end;
                if start == input.len() {
                    break;
                }
            }
            let text = capture.finish().text;
            let expected_tail = String::from_utf8_lossy(&input[input.len() - tail..]);
            assert!(text.ends_with(&*expected_tail), "{text}");
        }
    }

    /// Pushes `output` cut at `cuts` (any order, clamped to its length).
    fn push_in_pieces(capture: &mut Capture, output: &[u8], cuts: Vec<usize>) {
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(output.len())).collect();
        cuts.sort();
        let mut start = 0;
        for end in cuts.into_iter().chain([output.len()]) {
            capture.push(&output[start..end]);
            start = end;
        }
    }

    proptest::proptest! {
        /// With a cap, the log holds exactly the first `cap` bytes of the output, and the
        /// truncation says so whenever the output went past the cap.
        #[test]
        fn a_capped_log_holds_exactly_the_first_part(
            output in proptest::collection::vec(proptest::prelude::any::<u8>(), 40..400),
            cuts in proptest::collection::vec(0usize..400, 0..12),
            cap in 0u64..300,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let limits = LogLimits {
                max_bytes: cap,
                ..LogLimits::in_dir(&dir.path().join("logs"))
            };
            let mut capture = Capture::with_log_limits(4, 4, limits);
            push_in_pieces(&mut capture, &output, cuts);
            let truncation = capture.finish().truncation.unwrap();
            let log = std::fs::read(truncation.full_output.unwrap()).unwrap();
            let kept = (cap as usize).min(output.len());
            proptest::prop_assert_eq!(&log[..], &output[..kept]);
            let expected = (output.len() as u64 > cap).then_some(cap);
            proptest::prop_assert_eq!(truncation.log_holds_first, expected);
        }
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let mut capture = Capture::new(4, 4, &dir.path().join("logs"));
        capture.push("ééééé-----ééééé".as_bytes());
        let captured = capture.finish();
        assert!(captured.text.starts_with("éé\n[…"), "{}", captured.text);
        assert!(captured.text.ends_with("…]\néé"), "{}", captured.text);
    }

    proptest::proptest! {
        /// Whatever the sizes of the pieces, the result is the one the limits define: all of
        /// the output up to head + twice the tail, else the head, a gap line and the last
        /// `tail_limit` bytes, with the whole output in the log.
        #[test]
        fn the_result_does_not_depend_on_how_the_output_was_cut(
            output in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            cuts in proptest::collection::vec(0usize..400, 0..12),
            head_limit in 0usize..24,
            tail_limit in 0usize..24,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut capture = Capture::new(head_limit, tail_limit, &dir.path().join("logs"));
            push_in_pieces(&mut capture, &output, cuts);
            let captured = capture.finish();
            if output.len() <= head_limit + tail_limit.saturating_mul(2).max(1) {
                proptest::prop_assert_eq!(captured.text, String::from_utf8_lossy(&output));
                proptest::prop_assert!(captured.truncation.is_none());
            } else {
                let head = &output[..head_limit];
                let head = &head[..utf8_safe_end(head)];
                let tail = &output[output.len() - tail_limit..];
                let tail = &tail[utf8_safe_start(tail)..];
                let dropped = output.len() - head.len() - tail.len();
                let mut text = String::from_utf8_lossy(head).into_owned();
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&format!("[… {dropped} bytes of output dropped here …]\n"));
                text.push_str(&String::from_utf8_lossy(tail));
                proptest::prop_assert_eq!(captured.text, text);
                let truncation = captured.truncation.unwrap();
                proptest::prop_assert_eq!(truncation.dropped_bytes, dropped as u64);
                let log = std::fs::read(truncation.full_output.unwrap()).unwrap();
                proptest::prop_assert_eq!(log, output);
            }
        }
    }
}
