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
    /// Opening or writing the log failed; the result says the full output was not kept.
    Failed,
}

/// What [`Capture::finish`] hands back.
pub struct Captured {
    /// The text for the result: everything, or head + gap line + tail.
    pub text: String,
    pub truncation: Option<Truncation>,
    /// Why the full log could not be written, if it could not.
    pub log_error: Option<String>,
}

impl Capture {
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
        if let LogState::Writing { file, .. } = &mut self.log {
            if file.write_all(bytes).is_err() {
                self.log = LogState::Failed;
            }
        }
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > self.tail_limit.saturating_mul(2).max(1) {
            if matches!(self.log, LogState::NotNeeded) {
                self.open_log();
            }
            let excess = self.tail.len() - self.tail_limit;
            self.tail.drain(..excess);
        }
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
        let opened = std::fs::create_dir_all(&self.log_dir)
            .and_then(|()| File::create(&path))
            .and_then(|file| {
                let mut file = BufWriter::with_capacity(256 * 1024, file);
                file.write_all(&self.head)?;
                file.write_all(&self.tail)?;
                Ok(file)
            });
        self.log = match opened {
            Ok(file) => LogState::Writing { path, file },
            Err(_) => LogState::Failed,
        };
    }

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
            LogState::Failed => (
                None,
                Some(format!(
                    "could not write the full output under {}",
                    self.log_dir.display()
                )),
            ),
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
        let mut capture = Capture::new(8, 8, dir.path());
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
        let mut capture = Capture::new(4, 4, dir.path());
        let input: Vec<u8> = (0..1000).map(|i| b'a' + (i % 26) as u8).collect();
        for piece in input.chunks(7) {
            capture.push(piece);
        }
        let captured = capture.finish();
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
        let mut capture = Capture::new(4, 4, dir.path());
        capture.push("ééééé-----ééééé".as_bytes());
        let captured = capture.finish();
        assert!(captured.text.starts_with("éé\n[…"), "{}", captured.text);
        assert!(captured.text.ends_with("…]\néé"), "{}", captured.text);
    }
}
