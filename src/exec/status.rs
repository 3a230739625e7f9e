//! How a run ended: the structured status that the status markers carry.
//!
//! Owns only plain values; rendering and parsing them as text lives in `tool::markers`.

use std::time::Duration;

/// How the shell process ended.
///
/// Serialized as `{"code": 0}` or `{"signal": 9}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// It exited with this code (0 is success).
    Code(i32),
    /// It was killed by this signal number (see [`signal_name`]).
    Signal(i32),
}

impl Exit {
    /// Exit code 0.
    pub fn is_success(self) -> bool {
        self == Exit::Code(0)
    }
}

/// Output was too large to keep whole: the middle was dropped from the result text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Truncation {
    /// How many bytes of output were dropped between the kept head and tail.
    pub dropped_bytes: u64,
    /// Where the full output was written, if writing it succeeded.
    pub full_output: Option<String>,
    /// Set when the log reached its cap: it holds only the first this-many bytes of the output.
    pub log_holds_first: Option<u64>,
}

impl Truncation {
    /// `dropped_bytes` were dropped from the result; the full output is at `full_output`.
    pub fn new(dropped_bytes: u64, full_output: Option<String>) -> Self {
        Truncation {
            dropped_bytes,
            full_output,
            log_holds_first: None,
        }
    }

    /// The same truncation, with a log that holds only the first `bytes` of the output.
    pub fn log_holds_first(mut self, bytes: u64) -> Self {
        self.log_holds_first = Some(bytes);
        self
    }
}

/// Everything the status markers say about a run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RunStatus {
    /// How the shell ended.
    pub exit: Exit,
    /// Set when the run was killed because it exceeded this timeout (millisecond precision).
    pub timed_out_after: Option<Duration>,
    /// Set when the run was killed because the caller cancelled it.
    pub cancelled: bool,
    /// Set when the middle of the output was dropped from the result.
    pub truncation: Option<Truncation>,
}

impl RunStatus {
    /// A run that exited with `code`, nothing else to say.
    pub fn exited(code: i32) -> Self {
        RunStatus {
            exit: Exit::Code(code),
            timed_out_after: None,
            cancelled: false,
            truncation: None,
        }
    }

    /// A run killed by `signal`, nothing else to say.
    pub fn signalled(signal: i32) -> Self {
        RunStatus {
            exit: Exit::Signal(signal),
            ..RunStatus::exited(0)
        }
    }

    /// The same status, killed because it exceeded `timeout`.
    pub fn timed_out_after(mut self, timeout: Duration) -> Self {
        self.timed_out_after = Some(timeout);
        self
    }

    /// The same status, cancelled by the caller.
    pub fn cancelled(mut self) -> Self {
        self.cancelled = true;
        self
    }

    /// The same status, with the middle of its output dropped.
    pub fn truncated(mut self, truncation: Truncation) -> Self {
        self.truncation = Some(truncation);
        self
    }

    /// The exit code, when the shell exited (rather than being killed by a signal).
    pub fn exit_code(&self) -> Option<i32> {
        match self.exit {
            Exit::Code(code) => Some(code),
            Exit::Signal(_) => None,
        }
    }

    /// The signal that killed the shell, by name (`SIGKILL`), when one did.
    pub fn signal(&self) -> Option<String> {
        match self.exit {
            Exit::Code(_) => None,
            Exit::Signal(signal) => Some(signal_name(signal)),
        }
    }

    /// Exit code 0, and neither cancelled nor timed out.
    pub fn success(&self) -> bool {
        self.exit.is_success() && !self.cancelled && self.timed_out_after.is_none()
    }
}

/// The conventional name of a signal number (`9` → `SIGKILL`); `SIG<n>` when it has none.
pub fn signal_name(signal: i32) -> String {
    #[cfg(unix)]
    {
        if let Ok(known) = nix::sys::signal::Signal::try_from(signal) {
            return known.as_str().to_string();
        }
        #[cfg(target_os = "linux")]
        {
            let (min, max) = (libc::SIGRTMIN(), libc::SIGRTMAX());
            if (min..=max).contains(&signal) {
                return format!("SIGRTMIN+{}", signal - min);
            }
        }
    }
    format!("SIG{signal}")
}

/// The inverse of [`signal_name`].
pub fn signal_number(name: &str) -> Option<i32> {
    #[cfg(unix)]
    if let Ok(known) = name.parse::<nix::sys::signal::Signal>() {
        return Some(known as i32);
    }
    #[cfg(target_os = "linux")]
    if let Some(offset) = name.strip_prefix("SIGRTMIN+") {
        let offset: i32 = offset.parse().ok()?;
        let signal = libc::SIGRTMIN().checked_add(offset)?;
        return (signal <= libc::SIGRTMAX() && offset.to_string() == name["SIGRTMIN+".len()..])
            .then_some(signal);
    }
    let number: i32 = name.strip_prefix("SIG")?.parse().ok()?;
    // Only the canonical spelling parses, so that name -> number -> name is exact too.
    (signal_name(number) == name).then_some(number)
}
