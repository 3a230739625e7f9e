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
    CallEnd, CallRecord, Change, ImageRecord, JobRecord, SaidRecord, SessionRecord, ShellRecord,
    TurnRecord, VarRecord,
};

use crate::exec::RunOutcome;
use crate::present::changes::ChangeView;

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

/// How many changes the journal takes before the record is written whole again.
pub const JOURNAL_ENTRIES: usize = 64;
/// How many bytes the journal takes before the record is written whole again.
pub const JOURNAL_BYTES: usize = 256 * 1024;

/// The record of one active session, kept in the store (when there is one) after each change.
///
/// Each change is appended to the session's journal as one line ([`Change`], one `write`),
/// and the record is written whole (atomically, which also empties the journal) when the
/// session starts, every [`JOURNAL_ENTRIES`] changes or [`JOURNAL_BYTES`], after a failed
/// append, and at [`SessionLog::compact`]. Every change is made and kept under one lock, so the
/// store always holds the latest record (two changes never reach the disk out of order).
/// Without a store (`--no-history`) nothing is written and no history is kept, only what the
/// session needs (its title).
#[non_exhaustive]
pub struct SessionLog {
    store: Option<Store>,
    live: Mutex<Live>,
    /// A failed write is logged once per session, not on every call.
    warned: AtomicBool,
    /// Set once the record is deleted: nothing is written after that.
    forgotten: AtomicBool,
    /// Set when the agent is ending: the jobs it kills from then on ended with it.
    agent_ending: AtomicBool,
}

/// A [`SessionLog`]'s record and its journal.
struct Live {
    record: SessionRecord,
    /// The journal, open for appending, once something was appended since the last whole write.
    journal: Option<std::fs::File>,
    /// Changes and bytes appended since the last whole write.
    entries: usize,
    bytes: usize,
    /// The next change writes the record whole (at the start, and after a failed write).
    whole: bool,
}

/// Numbers the journals' tokens of this process.
static JOURNALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A token no other whole write of any process carries.
fn journal_token() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{nanos}-{}",
        std::process::id(),
        JOURNALS.fetch_add(1, Ordering::Relaxed)
    )
}

impl SessionLog {
    /// The log of a new or restored session; writes `record` whole at once.
    pub fn new(store: Option<Store>, record: SessionRecord) -> Self {
        let log = SessionLog {
            store,
            live: Mutex::new(Live {
                record,
                journal: None,
                entries: 0,
                bytes: 0,
                whole: true,
            }),
            warned: AtomicBool::new(false),
            forgotten: AtomicBool::new(false),
            agent_ending: AtomicBool::new(false),
        };
        log.write_whole(&mut log.live.lock().unwrap());
        log
    }

    /// A copy of the record as it is now.
    pub fn record(&self) -> SessionRecord {
        self.live.lock().unwrap().record.clone()
    }

    fn warn(&self, id: &str, error: &StoreError) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(session = %id, %error, "the session could not be saved");
        }
    }

    fn store(&self) -> Option<&Store> {
        self.store
            .as_ref()
            .filter(|_| !self.forgotten.load(Ordering::Relaxed))
    }

    /// Writes the record whole with a new journal token (which leaves the journal empty).
    fn write_whole(&self, live: &mut Live) {
        let Some(store) = self.store() else {
            return;
        };
        live.record.journal = Some(journal_token());
        live.journal = None;
        match store.save(&live.record) {
            Ok(()) => {
                (live.entries, live.bytes, live.whole) = (0, 0, false);
            }
            Err(error) => {
                live.whole = true;
                self.warn(&live.record.id, &error);
            }
        }
    }

    /// Applies `change` and keeps it; `then` reads the record after it, with what
    /// [`SessionRecord::apply`] returned.
    fn change<R>(&self, change: Change, then: impl FnOnce(&SessionRecord, u64) -> R) -> R {
        let mut live = self.live.lock().unwrap();
        let live = &mut *live;
        let Some(store) = self.store() else {
            let applied = live.record.apply(change);
            if self.store.is_none() {
                live.record.history.clear();
                live.record.jobs.clear();
                live.record.turns.clear();
            }
            return then(&live.record, applied);
        };
        let whole = live.whole || live.entries >= JOURNAL_ENTRIES || live.bytes >= JOURNAL_BYTES;
        let line = (!whole).then(|| {
            let token = live.record.journal.as_deref().unwrap_or_default();
            let mut line = serde_json::to_vec(&(token, &change)).expect("a change serializes");
            line.push(b'\n');
            line
        });
        let applied = live.record.apply(change);
        match line {
            None => self.write_whole(live),
            Some(line) => match store.append(&live.record.id, &mut live.journal, &line) {
                Ok(()) => {
                    live.entries += 1;
                    live.bytes += line.len();
                }
                Err(error) => {
                    // The journal may end in a torn line now: the next change writes whole.
                    live.whole = true;
                    live.journal = None;
                    self.warn(&live.record.id, &error);
                }
            },
        }
        then(&live.record, applied)
    }

    /// Writes the record whole if its journal has changes (the agent is ending, or the
    /// session closes): an older agent, which reads no journal, then finds them all.
    pub fn compact(&self) {
        let mut live = self.live.lock().unwrap();
        if live.entries > 0 || live.whole {
            self.write_whole(&mut live);
        }
    }

    /// Records that a turn started with `prompt`; returns its number.
    pub fn turn_started(&self, prompt: &str) -> u64 {
        self.turn_started_with_images(prompt, Vec::new())
    }

    /// Records that a turn started with `prompt` and `images` (as
    /// [`record::ImageRecord::of_prompt`] keeps them); returns its number.
    pub fn turn_started_with_images(&self, prompt: &str, images: Vec<record::ImageRecord>) -> u64 {
        let change = Change::Turn {
            prompt: prompt.to_string(),
            ms: now_ms(),
            images,
        };
        self.change(change, |_, turn| turn)
    }

    /// Records what the agent said in turn `turn` (after the turn's calls so far).
    pub fn said(&self, turn: u64, text: &str) {
        let text = text.to_string();
        let notice = false;
        self.change(Change::Said { turn, text, notice }, |_, _| ());
    }

    /// Records the agent's own notice in turn `turn` (a failed request, a stop): replayed to
    /// the client like what it said, never sent to a model as its words.
    pub fn notice(&self, turn: u64, text: &str) {
        let text = text.to_string();
        let notice = true;
        self.change(Change::Said { turn, text, notice }, |_, _| ());
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
        let (new_turn, number) = match turn {
            Ok(prompt) => (Some(prompt.to_string()), None),
            Err(number) => (None, Some(number)),
        };
        let mut call = CallRecord::new("", call_id, command, cwd, now_ms())
            .description(description.map(str::to_string));
        call.turn = number;
        // The first call gives the session its title.
        self.change(Change::Call { new_turn, call }, |record, turn| {
            (
                turn,
                record.title.clone().filter(|_| record.calls_made == 1),
            )
        })
    }

    /// Records how the call `call_id` ended, what it printed (head and tail are kept), what
    /// it changed (as its edit call showed it, bounded), and where and with what shell state
    /// the session's next command starts.
    pub fn call_finished(&self, call_id: &str, outcome: &RunOutcome, changes: Option<&ChangeView>) {
        let end = CallEnd::new(now_ms(), &outcome.status, &outcome.output)
            .with_duration(outcome.duration)
            .with_changes(changes);
        let shell = outcome.next_shell_state.as_ref().map(ShellRecord::of);
        let shell = {
            let live = self.live.lock().unwrap();
            shell.filter(|shell| *shell != live.record.shell)
        };
        let change = Change::CallEnd {
            call_id: call_id.to_string(),
            end,
            next_cwd: outcome.next_cwd.clone(),
            shell,
        };
        self.change(change, |_, _| ());
    }

    /// Records that background job `job_id` started, with its card's tool call id `call_id`.
    pub fn job_started(&self, job_id: u64, call_id: &str, command: &str, cwd: &Path) {
        let job = JobRecord {
            job_id,
            call_id: call_id.to_string(),
            command: command.to_string(),
            cwd: cwd.to_path_buf(),
            started_ms: now_ms(),
            after_calls: 0, // push_job places it after the calls and turns made so far
            end: None,
            ended_with_agent: false,
            after_turns: None,
        };
        self.change(Change::Job { job }, |_, _| ());
    }

    /// Records how the job whose card is `call_id` ended, what it printed (head and tail are
    /// kept) and changed (bounded). A job killed after [`Self::agent_ending`] is recorded as
    /// ended with the agent.
    pub fn job_finished(&self, call_id: &str, outcome: &RunOutcome, changes: Option<&ChangeView>) {
        let ended_with_agent = self.agent_ending.load(Ordering::SeqCst) && outcome.status.cancelled;
        let end = CallEnd::new(now_ms(), &outcome.status, &outcome.output)
            .with_duration(outcome.duration)
            .with_changes(changes);
        let change = Change::JobEnd {
            call_id: call_id.to_string(),
            end,
            ended_with_agent,
        };
        self.change(change, |_, _| ());
    }

    /// The agent is ending (its client went away, or it was stopped) and is about to kill the
    /// session's jobs: they are recorded as ended with the agent, not as killed by a user.
    pub fn agent_ending(&self) {
        self.agent_ending.store(true, Ordering::SeqCst);
    }

    /// Stops writing the record (it is being deleted). A write in progress finishes first.
    pub fn forget(&self) {
        let mut live = self.live.lock().unwrap();
        live.journal = None;
        self.forgotten.store(true, Ordering::Relaxed);
    }

    /// Records the model the session chose (`None`: the driver's default).
    pub fn set_model(&self, model: Option<&str>) {
        let change = Change::Model {
            model: model.map(str::to_string),
            ms: now_ms(),
        };
        self.change(change, |_, _| ());
    }

    /// Records the reasoning level the session chose (`None`: the driver's default).
    pub fn set_thought_level(&self, level: Option<&str>) {
        let change = Change::ThoughtLevel {
            level: level.map(str::to_string),
            ms: now_ms(),
        };
        self.change(change, |_, _| ());
    }

    /// Records the session's sandbox mode.
    pub fn set_mode(&self, mode: &str) {
        let change = Change::Mode {
            mode: mode.to_string(),
            ms: now_ms(),
        };
        self.change(change, |_, _| ());
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
            blocked_hosts: Vec::new(),
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
        kept.job_finished("call-1-1", &outcome(2, "oops\n"), None);
        let end = store.load("s").unwrap().jobs[0].end.clone().unwrap();
        assert_eq!(
            (end.exit_code, end.output_head.as_str()),
            (Some(2), "oops\n")
        );
        assert_eq!(end.duration_ms, Some(7));

        let none = SessionLog::new(None, SessionRecord::new("t", "/w".into(), "full", 1));
        none.job_started(1, "call-1-1", "make watch", Path::new("/w"));
        none.job_finished("call-1-1", &outcome(0, "secret\n"), None);
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
        log.job_finished("a", &killed, None);
        log.job_finished("b", &outcome(0, ""), None);
        let jobs = log.record().jobs;
        assert!(jobs[0].ended_with_agent, "killed by the ending agent");
        assert!(!jobs[1].ended_with_agent, "ended on its own");
    }

    /// A session with one turn of two calls, a job and a mode change, all in its journal.
    fn journaled(store: &Store) -> SessionLog {
        let log = SessionLog::new(
            Some(store.clone()),
            SessionRecord::new("s", "/w".into(), "full", 1),
        );
        let (turn, title) =
            log.turn_and_call_started(Ok("make it"), "c1", "make", None, Path::new("/w"));
        assert_eq!((turn, title.as_deref()), (1, Some("make")));
        let mut cd = outcome(0, "built\n");
        cd.next_cwd = "/w/sub".into();
        log.call_finished("c1", &cd, None);
        log.said(turn, "done; now the tests");
        log.call_started(turn, "c2", "make test", Some("tests"), Path::new("/w/sub"));
        log.call_finished("c2", &outcome(2, "1 failed\n"), None);
        log.job_started(1, "j1", "make watch", Path::new("/w/sub"));
        log.set_mode("off");
        log
    }

    fn journal(store: &Store) -> PathBuf {
        store.dir().join("s.journal")
    }

    #[test]
    fn each_change_is_one_journal_line_and_another_reader_sees_them_all() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let log = journaled(&store);
        let lines = std::fs::read_to_string(journal(&store)).unwrap();
        assert_eq!(lines.lines().count(), 7, "one line per change:\n{lines}");
        // The whole record was written once, at the start: it has no call.
        let written: SessionRecord =
            serde_json::from_slice(&std::fs::read(store.dir().join("s.json")).unwrap()).unwrap();
        assert!(written.history.is_empty());
        // A reader (another process) folds the journal in: the same record as in memory.
        let loaded = Store::new(dir.path()).load("s").unwrap();
        assert_eq!(loaded, log.record());
        assert_eq!(loaded.history[1].cwd, Path::new("/w/sub"));
        assert_eq!(loaded.history[1].end.as_ref().unwrap().exit_code, Some(2));
        assert_eq!(loaded.turns[0].said[0].text, "done; now the tests");
        assert_eq!((loaded.mode.as_str(), loaded.jobs.len()), ("off", 1));
        let page = store.list(&ListQuery::new(10)).unwrap();
        assert_eq!(page.sessions[0].title.as_deref(), Some("make"));
        // Compacted (the agent ends): the record is whole again, the journal gone.
        log.compact();
        assert!(!journal(&store).exists());
        assert_eq!(store.load("s").unwrap(), log.record());
    }

    #[test]
    fn a_crash_at_each_point_leaves_a_whole_record_that_loads() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let log = journaled(&store);
        let whole = std::fs::read(journal(&store)).unwrap();
        let before_last = {
            let lines: Vec<&[u8]> = whole.split_inclusive(|&b| b == b'\n').collect();
            lines[..lines.len() - 1].concat()
        };
        let mode_before = "full";

        // 1. Killed while appending a line: the torn line is ignored, the ones before it apply.
        let last_line = &whole[before_last.len()..];
        let mut torn = before_last.clone();
        torn.extend_from_slice(&last_line[..last_line.len() / 2]);
        std::fs::write(journal(&store), &torn).unwrap();
        let loaded = store.load("s").unwrap();
        assert_eq!(loaded.mode, mode_before, "the torn change is not applied");
        assert_eq!(loaded.jobs.len(), 1, "the changes before it are");
        // ... and a line that is not a change ends the journal there too.
        let mut garbage = before_last.clone();
        garbage.extend_from_slice(b"{not a change}\n");
        garbage.extend_from_slice(last_line);
        std::fs::write(journal(&store), &garbage).unwrap();
        assert_eq!(store.load("s").unwrap().mode, mode_before);

        // 2. Killed while writing the record whole (a temporary file, not renamed yet): the
        // record and the journal before it are untouched.
        std::fs::write(journal(&store), &whole).unwrap();
        std::fs::write(
            store.dir().join(".s.1.0.tmp"),
            b"{\"format\":2,\"id\":\"s\"",
        )
        .unwrap();
        assert_eq!(store.load("s").unwrap(), log.record());
        std::fs::remove_file(store.dir().join(".s.1.0.tmp")).unwrap();

        // 3. Killed after the whole record replaced the old one, before the journal went:
        // its lines carry the old token and are not applied twice.
        log.compact();
        std::fs::write(journal(&store), &whole).unwrap();
        let loaded = store.load("s").unwrap();
        assert_eq!(loaded, log.record());
        assert_eq!(loaded.calls_made, 2, "not applied twice");

        // A record written before the journal (no token) ignores any journal.
        let mut old = log.record();
        old.journal = None;
        std::fs::write(
            store.dir().join("s.json"),
            serde_json::to_vec(&old).unwrap(),
        )
        .unwrap();
        assert_eq!(store.load("s").unwrap(), old);
    }

    #[test]
    fn the_record_is_written_whole_again_once_the_journal_is_long() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let log = SessionLog::new(
            Some(store.clone()),
            SessionRecord::new("s", "/w".into(), "full", 1),
        );
        for n in 0..JOURNAL_ENTRIES {
            log.set_mode(&format!("m{n}"));
        }
        assert!(journal(&store).exists());
        log.set_mode("last");
        assert!(!journal(&store).exists(), "written whole, the journal gone");
        let written: SessionRecord =
            serde_json::from_slice(&std::fs::read(store.dir().join("s.json")).unwrap()).unwrap();
        assert_eq!(written.mode, "last");
    }

    #[test]
    fn iso8601_matches_known_instants() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        // date -u -d @1796072645.123 +%FT%T.%3NZ
        assert_eq!(iso8601(1_796_072_645_123), "2026-11-30T21:04:05.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
