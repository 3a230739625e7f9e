//! The session store: what is kept of each session on disk, so that a session outlives the agent
//! process that made it (a later process lists it, restores its directory and mode, and replays
//! its history).
//!
//! Provider-neutral: no ACP types. Owns the record ([`record`]), its files ([`fs`]), where the
//! state directory is ([`state_dir`]), and [`SessionLog`], the live record of one active session
//! that the agent updates with one call per event (session made, call started, call finished,
//! job started, job ended, mode changed). Must not touch: how a record is shown to a client (the ACP layer's replay), how
//! commands run.

pub mod fs;
pub mod record;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

pub use fs::{ListPage, ListQuery, SessionSummary, Store, StoreError};
pub use record::{
    CallEnd, CallRecord, JobRecord, SaidRecord, SessionRecord, ShellRecord, TurnRecord, VarRecord,
};

use crate::exec::RunOutcome;

/// The state directory: `explicit` (`--state-dir`), else `$XDG_STATE_HOME/acp-bash`, else
/// `$HOME/.local/state/acp-bash`. `None` when none of them gives an absolute path.
pub fn state_dir(
    explicit: Option<&Path>,
    xdg_state_home: Option<&Path>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    if let Some(dir) = explicit {
        return Some(dir.to_path_buf());
    }
    if let Some(xdg) = xdg_state_home.filter(|p| p.is_absolute()) {
        return Some(xdg.join("acp-bash"));
    }
    home.filter(|p| p.is_absolute())
        .map(|home| home.join(".local/state/acp-bash"))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `ms` since the epoch as ISO 8601 in UTC, to the millisecond: `2026-11-30T21:04:05.123Z`.
pub fn iso8601(ms: u64) -> String {
    let (days, rest) = ((ms / 86_400_000) as i64, ms % 86_400_000);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

/// The record of one active session, written to the store (when there is one) after each change.
///
/// Every change is made and written under one lock, so the file always holds the latest record
/// (two changes never reach the disk out of order). Without a store (`--no-history`) nothing
/// is written and no history is kept, only what the session needs (its title).
#[non_exhaustive]
pub struct SessionLog {
    store: Option<Store>,
    record: Mutex<SessionRecord>,
    /// A failed write is logged once per session, not on every call.
    warned: AtomicBool,
    /// Set once the record is deleted: nothing is written after that.
    forgotten: AtomicBool,
    /// Set when the agent is ending: the jobs it kills from then on ended with it.
    agent_ending: AtomicBool,
}

impl SessionLog {
    /// The log of a new or restored session; writes `record` at once.
    pub fn new(store: Option<Store>, record: SessionRecord) -> Self {
        let log = SessionLog {
            store,
            record: Mutex::new(record),
            warned: AtomicBool::new(false),
            forgotten: AtomicBool::new(false),
            agent_ending: AtomicBool::new(false),
        };
        log.change(|_| ());
        log
    }

    /// A copy of the record as it is now.
    pub fn record(&self) -> SessionRecord {
        self.record.lock().unwrap().clone()
    }

    /// Applies `change` and writes the record.
    fn change<R>(&self, change: impl FnOnce(&mut SessionRecord) -> R) -> R {
        let mut record = self.record.lock().unwrap();
        let result = change(&mut record);
        if self.store.is_none() {
            record.history.clear();
            record.jobs.clear();
            record.turns.clear();
        }
        if let Some(store) = self
            .store
            .as_ref()
            .filter(|_| !self.forgotten.load(Ordering::Relaxed))
        {
            if let Err(error) = store.save(&record) {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(session = %record.id, %error, "the session could not be saved");
                }
            }
        }
        result
    }

    /// Records that a turn started with `prompt`; returns its number.
    pub fn turn_started(&self, prompt: &str) -> u64 {
        self.change(|record| record.push_turn(prompt, now_ms()))
    }

    /// Records what the agent said in turn `turn` (after the turn's calls so far).
    pub fn said(&self, turn: u64, text: &str) {
        self.change(|record| record.push_said(turn, text));
    }

    /// Records that a call of turn `turn` started. Returns the session's title when this call
    /// gave it one (the session's first call), for the client to show.
    pub fn call_started(
        &self,
        turn: u64,
        call_id: &str,
        command: &str,
        description: Option<&str>,
        cwd: &Path,
    ) -> Option<String> {
        self.turn_and_call_started(Err(turn), call_id, command, description, cwd)
            .1
    }

    /// [`Self::call_started`] for turn `turn` (`Err(number)`), or for a new turn with prompt
    /// `Ok(prompt)` recorded with it in one write. Returns the turn's number and the title.
    pub fn turn_and_call_started(
        &self,
        turn: Result<&str, u64>,
        call_id: &str,
        command: &str,
        description: Option<&str>,
        cwd: &Path,
    ) -> (u64, Option<String>) {
        self.change(|record| {
            let turn = match turn {
                Ok(prompt) => record.push_turn(prompt, now_ms()),
                Err(number) => number,
            };
            let untitled = record.title.is_none();
            record.push_call(
                CallRecord::new("", call_id, command, cwd, now_ms())
                    .turn(turn)
                    .description(description.map(str::to_string)),
            );
            (turn, record.title.clone().filter(|_| untitled))
        })
    }

    /// Records how the call `call_id` ended, what it printed (head and tail are kept), and
    /// where and with what shell state the session's next command starts.
    pub fn call_finished(&self, call_id: &str, outcome: &RunOutcome) {
        let end = CallEnd::new(now_ms(), &outcome.status, &outcome.output)
            .with_duration(outcome.duration);
        self.change(|record| {
            if let Some(state) = &outcome.next_shell_state {
                record.shell = ShellRecord::of(state);
            }
            record.finish_call(call_id, end, outcome.next_cwd.clone())
        });
    }

    /// Records that background job `job_id` started, with its card's tool call id `call_id`.
    pub fn job_started(&self, job_id: u64, call_id: &str, command: &str, cwd: &Path) {
        self.change(|record| {
            record.push_job(JobRecord {
                job_id,
                call_id: call_id.to_string(),
                command: command.to_string(),
                cwd: cwd.to_path_buf(),
                started_ms: now_ms(),
                after_calls: 0, // push_job places it after the calls and turns made so far
                end: None,
                ended_with_agent: false,
                after_turns: None,
            })
        });
    }

    /// Records how the job whose card is `call_id` ended and what it printed (head and tail are
    /// kept). A job killed after [`Self::agent_ending`] is recorded as ended with the agent.
    pub fn job_finished(&self, call_id: &str, outcome: &RunOutcome) {
        let ended_with_agent = self.agent_ending.load(Ordering::SeqCst) && outcome.status.cancelled;
        let end = CallEnd::new(now_ms(), &outcome.status, &outcome.output)
            .with_duration(outcome.duration);
        self.change(|record| record.finish_job(call_id, end, ended_with_agent));
    }

    /// The agent is ending (its client went away, or it was stopped) and is about to kill the
    /// session's jobs: they are recorded as ended with the agent, not as killed by a user.
    pub fn agent_ending(&self) {
        self.agent_ending.store(true, Ordering::SeqCst);
    }

    /// Stops writing the record (it is being deleted). A write in progress finishes first.
    pub fn forget(&self) {
        let _record = self.record.lock().unwrap();
        self.forgotten.store(true, Ordering::Relaxed);
    }

    /// Records the model the session chose (`None`: the driver's default).
    pub fn set_model(&self, model: Option<&str>) {
        self.change(|record| {
            record.model = model.map(str::to_string);
            record.updated_ms = now_ms().max(record.updated_ms);
        });
    }

    /// Records the session's sandbox mode.
    pub fn set_mode(&self, mode: &str) {
        self.change(|record| {
            record.mode = mode.to_string();
            record.updated_ms = now_ms().max(record.updated_ms);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_dir_prefers_the_flag_then_xdg_then_home() {
        let p = |s: &str| Some(PathBuf::from(s));
        let flag = Path::new("/flag");
        let xdg = Path::new("/xdg");
        let home = Path::new("/home/me");
        assert_eq!(state_dir(Some(flag), Some(xdg), Some(home)), p("/flag"));
        assert_eq!(state_dir(None, Some(xdg), Some(home)), p("/xdg/acp-bash"));
        assert_eq!(
            state_dir(None, Some(Path::new("relative")), Some(home)),
            p("/home/me/.local/state/acp-bash")
        );
        assert_eq!(state_dir(None, None, None), None);
    }

    fn outcome(code: i32, output: &str) -> RunOutcome {
        RunOutcome {
            output: output.into(),
            status: crate::exec::RunStatus::exited(code),
            cwd: "/w".into(),
            next_cwd: "/w".into(),
            next_shell_state: None,
            notices: Vec::new(),
            duration: std::time::Duration::from_millis(7),
        }
    }

    #[test]
    fn a_log_records_jobs_in_the_store_and_nothing_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let kept = SessionLog::new(
            Some(store.clone()),
            SessionRecord::new("s", "/w".into(), "full", 1),
        );
        kept.job_started(1, "call-1-1", "make watch", Path::new("/w"));
        let on_disk = store.load("s").unwrap();
        assert_eq!(on_disk.jobs.len(), 1);
        assert_eq!(on_disk.jobs[0].end, None, "written when it starts");
        kept.job_finished("call-1-1", &outcome(2, "oops\n"));
        let end = store.load("s").unwrap().jobs[0].end.clone().unwrap();
        assert_eq!(
            (end.exit_code, end.output_head.as_str()),
            (Some(2), "oops\n")
        );
        assert_eq!(end.duration_ms, Some(7));

        let none = SessionLog::new(None, SessionRecord::new("t", "/w".into(), "full", 1));
        none.job_started(1, "call-1-1", "make watch", Path::new("/w"));
        none.job_finished("call-1-1", &outcome(0, "secret\n"));
        assert!(none.record().jobs.is_empty(), "--no-history keeps no jobs");
        assert!(matches!(store.load("t"), Err(StoreError::NotFound(_))));
    }

    #[test]
    fn a_job_killed_while_the_agent_ends_is_recorded_as_ended_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = SessionLog::new(
            Some(Store::new(dir.path())),
            SessionRecord::new("s", "/w".into(), "full", 1),
        );
        log.job_started(1, "a", "sleep 9", Path::new("/w"));
        log.job_started(2, "b", "true", Path::new("/w"));
        log.agent_ending();
        let mut killed = outcome(143, "serving\n");
        killed.status.cancelled = true;
        log.job_finished("a", &killed);
        log.job_finished("b", &outcome(0, ""));
        let jobs = log.record().jobs;
        assert!(jobs[0].ended_with_agent, "killed by the ending agent");
        assert!(!jobs[1].ended_with_agent, "ended on its own");
    }

    #[test]
    fn iso8601_matches_known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        // date -u -d @1796072645.123 +%FT%T.%3NZ
        assert_eq!(iso8601(1_796_072_645_123), "2026-11-30T21:04:05.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
