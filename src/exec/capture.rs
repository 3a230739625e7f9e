//! Keeps a bounded copy of a run's output for its result: all of it when it is small, else the
//! first and last bytes around a gap line, with the full output written to a log file.
//!
//! Owns: the memory bound and the log file. Must not touch: chunking for live streaming
//! (see [`super::chunk`]), status markers.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::chunk::{utf8_safe_end, utf8_safe_start};
use super::status::Truncation;

/// The log's write buffer (see [`Capture::open_log`]).
const LOG_BUFFER_BYTES: usize = 32 * 1024;

/// A bounded copy of the output, spilling to a log file once it no longer fits.
pub struct Capture {
    head: Vec<u8>,
    head_limit: usize,
    /// The newest bytes; trimmed to `tail_limit` whenever it grows past twice that.
    tail: Vec<u8>,
    tail_limit: usize,
    total: u64,
    log_dir: PathBuf,
    log: LogState,
}

enum LogState {
    /// Nothing was dropped yet, so no log is needed.
    NotNeeded,
    Writing {
        path: PathBuf,
        file: BufWriter<File>,
    },
    /// Opening or writing the log failed (why); the result says the full output was not kept.
    Failed(String),
}

/// What [`Capture::finish`] hands back.
pub struct Captured {
    /// The text for the result: everything, or head + gap line + tail.
    pub text: String,
    /// Set when the middle was dropped.
    pub truncation: Option<Truncation>,
    /// Why the full log could not be written, if it could not.
    pub log_error: Option<String>,
}

impl Capture {
    /// Keeps `head_limit` bytes from the start and `tail_limit` from the end; the full output goes to a log in `log_dir` once it is too large.
    pub fn new(head_limit: usize, tail_limit: usize, log_dir: &Path) -> Self {
        Capture {
            head: Vec::new(),
            head_limit,
            tail: Vec::new(),
            tail_limit,
            total: 0,
            log_dir: log_dir.to_path_buf(),
            log: LogState::NotNeeded,
        }
    }

    /// Adds output.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < self.head_limit {
            let take = bytes.len().min(self.head_limit - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
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
            LogState::Writing { file, path } => {
                if let Err(error) = file.write_all(bytes) {
                    self.log =
                        LogState::Failed(format!("writing {} failed: {error}", path.display()));
                }
                self.keep_tail(bytes);
            }
            LogState::Failed(_) => self.keep_tail(bytes),
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
        let path = self
            .log_dir
            .join(format!("run-{stamp}-{}-{n}.log", std::process::id()));
        let opened = super::logdir::prepare(&self.log_dir).and_then(|()| {
            let file = super::logdir::create_log(&path)
                .map_err(|error| format!("cannot create {}: {error}", path.display()))?;
            // Pieces at least this long (a busy pipe's 64 KiB reads) go straight to the
            // file, without a copy into the buffer; shorter ones are batched.
            let mut file = BufWriter::with_capacity(LOG_BUFFER_BYTES, file);
            file.write_all(&self.head)
                .and_then(|()| file.write_all(&self.tail))
                .map_err(|error| format!("writing {} failed: {error}", path.display()))?;
            Ok(file)
        });
        self.log = match opened {
            Ok(file) => LogState::Writing { path, file },
            Err(reason) => LogState::Failed(reason),
        };
    }

    /// The kept text, and how much was dropped.
    pub fn finish(self) -> Captured {
        let kept = self.head.len() + self.tail.len();
        if self.total as usize == kept && matches!(self.log, LogState::NotNeeded) {
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
        let (full_output, log_error) = match self.log {
            LogState::Writing { path, mut file } => match file.flush() {
                Ok(()) => (Some(path.to_string_lossy().into_owned()), None),
                Err(error) => (
                    None,
                    Some(format!("writing {} failed: {error}", path.display())),
                ),
            },
            LogState::Failed(reason) => (None, Some(reason)),
            LogState::NotNeeded => (None, None),
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
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(output.len())).collect();
            cuts.sort();
            let mut start = 0;
            for end in cuts.into_iter().chain([output.len()]) {
                capture.push(&output[start..end]);
                start = end;
            }
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
