//! What is kept of one session: [`SessionRecord`], its bounded list of [`TurnRecord`]s (each
//! prompt once, with the agent's text), its bounded history of [`CallRecord`]s (each call with
//! its turn and its end) and its bounded list of background [`JobRecord`]s.
//!
//! Format 2 added the turns. A format-1 record (written before) still loads: its calls carry
//! their prompt and no turn, and each is replayed as a turn of its own, as before. The shell
//! state ([`ShellRecord`]) is an optional field of format 2: a record without it loads with
//! none, and an older agent that reads a record with it ignores it.
//!
//! Owns the record's shape (serialized as JSON by [`super::fs`]), its bounds (how many calls and
//! jobs, how much of each one's text and output) and the conversion of a run's status to and
//! from the stored form. Plain values: no I/O, no ACP types. Must not touch: where records live.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::exec::{signal_name, signal_number, Exit, RunStatus, ShellState, Truncation};

/// The format of the records this version writes.
pub const FORMAT: u32 = 2;

/// The formats this version reads: 1 (calls with their prompt, before turns were kept) and 2.
pub const READS_FORMATS: std::ops::RangeInclusive<u32> = 1..=FORMAT;

/// How many turns a record keeps; older ones are dropped (and counted in
/// [`SessionRecord::dropped_turns`]).
pub const MAX_TURNS: usize = 50;

/// Bytes of the agent's text kept per turn (the rest is cut, and says so).
pub const KEEP_TURN_TEXT: usize = 16 * 1024;

/// How many calls a record keeps; older ones are dropped (and counted in
/// [`SessionRecord::dropped_calls`]).
pub const MAX_CALLS: usize = 50;

/// Bytes of a call's output kept from its start.
pub const KEEP_OUTPUT_HEAD: usize = 2 * 1024;
/// Bytes of a call's output kept from its end.
pub const KEEP_OUTPUT_TAIL: usize = 2 * 1024;

/// How many background jobs a record keeps; older ones are dropped (and counted in
/// [`SessionRecord::dropped_jobs`]).
pub const MAX_JOBS: usize = 20;

/// Bytes kept of a prompt, a command or a description (longer ones are cut, and say so).
pub const KEEP_TEXT: usize = 8 * 1024;
/// The most bytes of a call's changes (texts and diffs) kept for its edit call's replay; beyond
/// it the files are kept by name and what happened to them.
pub const KEEP_CHANGES: usize = 16 * 1024;

/// Base64 bytes of a prompt's images kept (5 MiB, what the model driver sends of one prompt:
/// `MAX_PROMPT_IMAGE_BYTES`): an image past it is kept by type and size only.
pub const KEEP_PROMPT_IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// Base64 bytes of images a record keeps in all (10 MiB, what the model driver sends of one
/// conversation: `MAX_CONVERSATION_IMAGE_BYTES`): past it, the oldest turns' images are kept by
/// type and size only.
pub const KEEP_IMAGE_BYTES: usize = 10 * 1024 * 1024;

/// One session as kept on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SessionRecord {
    /// [`FORMAT`] when written.
    pub format: u32,
    /// The session id, as the client knows it.
    pub id: String,
    /// The directory the session was created in (its workspace).
    pub root: PathBuf,
    /// Where the session's next command starts (a `cd` moves it).
    pub cwd: PathBuf,
    /// The sandbox mode's id (`workspace`, `read-only`, `full`, `off`).
    pub mode: String,
    /// Milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When the record last changed, in milliseconds since the Unix epoch.
    pub updated_ms: u64,
    /// The first command's description, else the first command (first line, shortened).
    pub title: Option<String>,
    /// How many calls the session has made in all (never decreases, unlike `history`).
    pub calls_made: u64,
    /// How many of the oldest calls were dropped from `history` to keep it bounded.
    pub dropped_calls: u64,
    /// The last [`MAX_CALLS`] calls, oldest first.
    pub history: Vec<CallRecord>,
    /// How many background jobs the session has started in all (never decreases). Absent in
    /// records written before jobs were kept: read as 0.
    #[serde(default)]
    pub jobs_started: u64,
    /// How many of the oldest jobs were dropped from `jobs` to keep it bounded.
    #[serde(default)]
    pub dropped_jobs: u64,
    /// The last [`MAX_JOBS`] background jobs (`/bg`), oldest first.
    #[serde(default)]
    pub jobs: Vec<JobRecord>,
    /// How many turns the session has recorded in all (never decreases). Absent in format 1.
    #[serde(default)]
    pub turns_made: u64,
    /// How many of the oldest turns were dropped from `turns` to keep it bounded.
    #[serde(default)]
    pub dropped_turns: u64,
    /// The last [`MAX_TURNS`] turns, oldest first (their calls are in `history`).
    #[serde(default)]
    pub turns: Vec<TurnRecord>,
    /// The shell state the session's next command starts with besides `cwd` (exported
    /// variables and the previous directory). Absent when there is none, and in records written
    /// before it was kept.
    #[serde(default, skip_serializing_if = "ShellRecord::is_empty")]
    pub shell: ShellRecord,
    /// The model the session chose (config option `model`: an id of the driver's models);
    /// absent for the driver's default, and in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The reasoning level the session chose (config option `reasoning`: an id of the
    /// driver's thought levels); absent for the driver's default, and in records written
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_level: Option<String>,
    /// The journal this record continues with: the lines of `<id>.journal` that carry this
    /// token are changes made after the record was written ([`Change`]); lines with another
    /// token are older (already in the record) or another writer's, and are ignored. Absent in
    /// records written before the journal, and when nothing continues them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<String>,
}

/// One change of a [`SessionRecord`], as a line of its journal keeps it: applied in order with
/// [`SessionRecord::apply`], the lines of a journal make the record its writer had in memory.
/// Each carries its own clock readings, so applying it again gives the same record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Change {
    /// A turn started with `prompt` at `ms` ([`SessionRecord::push_turn`]).
    Turn {
        /// The prompt.
        prompt: String,
        /// When.
        ms: u64,
        /// The images given with it (absent in journals written before images were kept).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageRecord>,
    },
    /// The agent said `text` in turn `turn` ([`SessionRecord::push_said`]).
    Said {
        /// The turn's number.
        turn: u64,
        /// The text.
        text: String,
        /// Whether it is the agent's own notice (an error, a stop), not a model's words.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        notice: bool,
    },
    /// The session chose a reasoning level (`None`: the driver's default).
    ThoughtLevel {
        /// The level's id.
        level: Option<String>,
        /// When.
        ms: u64,
    },
    /// A call started ([`SessionRecord::push_call`]); with `new_turn`, it is the first of a new
    /// turn with that prompt (started when the call did), which its `turn` then names.
    Call {
        /// The prompt of the turn the call starts, if it starts one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        new_turn: Option<String>,
        /// The call.
        call: CallRecord,
    },
    /// A call ended ([`SessionRecord::finish_call`]), and the shell state the session's next
    /// command starts with, when it changed.
    CallEnd {
        /// The call's id.
        call_id: String,
        /// How it ended.
        end: CallEnd,
        /// Where the next command starts.
        next_cwd: PathBuf,
        /// The new shell state, when it changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shell: Option<ShellRecord>,
    },
    /// A background job started ([`SessionRecord::push_job`]).
    Job {
        /// The job.
        job: JobRecord,
    },
    /// A background job ended ([`SessionRecord::finish_job`]).
    JobEnd {
        /// Its card's call id.
        call_id: String,
        /// How it ended.
        end: CallEnd,
        /// Whether it was killed because its agent was ending.
        ended_with_agent: bool,
    },
    /// The session chose a model (`None`: the driver's default).
    Model {
        /// The model.
        model: Option<String>,
        /// When.
        ms: u64,
    },
    /// The session's sandbox mode changed.
    Mode {
        /// The mode's id.
        mode: String,
        /// When.
        ms: u64,
    },
}

/// The shell state of a session as kept on disk: [`ShellState`] in a form JSON can hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ShellRecord {
    /// The exported variables that differ from the agent's environment, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vars: Vec<VarRecord>,
    /// The previous directory (`cd -`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_dir: Option<PathBuf>,
}

/// One variable of a [`ShellRecord`]: set (to `value`, or to the bytes `value_hex` when they are
/// not UTF-8), or unset when neither is there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct VarRecord {
    /// The variable's name.
    pub name: String,
    /// Its value, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Its value's bytes in hexadecimal, when they are not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_hex: Option<String>,
}

impl ShellRecord {
    /// No variable and no previous directory.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty() && self.previous_dir.is_none()
    }

    /// The stored form of `state`.
    pub fn of(state: &ShellState) -> Self {
        use std::os::unix::ffi::OsStrExt;
        ShellRecord {
            vars: state
                .vars
                .iter()
                .map(|(name, value)| {
                    let (value, value_hex) = match value.as_ref().map(|v| v.as_bytes()) {
                        None => (None, None),
                        Some(bytes) => match std::str::from_utf8(bytes) {
                            Ok(text) => (Some(text.to_string()), None),
                            Err(_) => (None, Some(hex(bytes))),
                        },
                    };
                    VarRecord {
                        name: name.clone(),
                        value,
                        value_hex,
                    }
                })
                .collect(),
            previous_dir: state.previous_dir.clone(),
        }
    }

    /// The state this record holds; a variable whose `value_hex` is not hexadecimal is left
    /// out.
    pub fn state(&self) -> ShellState {
        use std::os::unix::ffi::OsStringExt;
        let mut state = ShellState::default();
        for var in &self.vars {
            let value = match (&var.value, &var.value_hex) {
                (Some(text), _) => Some(std::ffi::OsString::from(text)),
                (None, Some(digits)) => match unhex(digits) {
                    Some(bytes) => Some(std::ffi::OsString::from_vec(bytes)),
                    None => continue,
                },
                (None, None) => None,
            };
            state.vars.insert(var.name.clone(), value);
        }
        state.previous_dir = self.previous_dir.clone();
        state
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(digits: &str) -> Option<Vec<u8>> {
    if !digits.len().is_multiple_of(2) || !digits.is_ascii() {
        return None;
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).ok())
        .collect()
}

/// One turn of a session: the prompt once, and the agent's text placed among the turn's calls
/// (which are in [`SessionRecord::history`], each naming its turn).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TurnRecord {
    /// Its number in the session (1 for the first turn recorded).
    pub number: u64,
    /// The prompt (cut at [`KEEP_TEXT`]).
    pub prompt: String,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// How many calls it has made.
    pub calls: u64,
    /// The agent's text, in order (at most [`KEEP_TURN_TEXT`] bytes in all).
    pub said: Vec<SaidRecord>,
    /// The images given with the prompt, in order (their data within
    /// [`KEEP_PROMPT_IMAGE_BYTES`] a turn and [`KEEP_IMAGE_BYTES`] a record). Absent in
    /// records written before images were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageRecord>,
}

/// An image given with a prompt (ACP `image` content).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ImageRecord {
    /// Its MIME type, as the client gave it.
    pub mime_type: String,
    /// Its size, in base64 bytes.
    pub bytes: u64,
    /// Its data (base64); `None` once it is not kept (past a bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
}

impl ImageRecord {
    /// The images of one prompt as a record keeps them (`(mime type, base64 data)` in order):
    /// each kept whole while the prompt's images fit [`KEEP_PROMPT_IMAGE_BYTES`], those past it
    /// by type and size only.
    pub fn of_prompt<'a>(images: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<Self> {
        let mut left = KEEP_PROMPT_IMAGE_BYTES;
        images
            .into_iter()
            .map(|(mime_type, data)| {
                let data = data.trim();
                let kept = data.len() <= left;
                if kept {
                    left -= data.len();
                }
                ImageRecord {
                    mime_type: mime_type.to_string(),
                    bytes: data.len() as u64,
                    data: kept.then(|| data.to_string()),
                }
            })
            .collect()
    }
}

/// A piece of the agent's text in a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SaidRecord {
    /// How many of the turn's calls came before it.
    pub after_calls: u64,
    /// The text.
    pub text: String,
    /// Set when the text is the agent's own notice (a failed request, a stop): shown again in
    /// a replay, never sent to a model as its words. Absent in records written before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub notice: bool,
}

/// One background job of a session: recorded when it starts, completed when it ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct JobRecord {
    /// Its number in the session's job registry of the agent process that ran it (`/jobs`);
    /// a later process numbers its own jobs from 1 again.
    pub job_id: u64,
    /// The id of the job's tool call (its card) on the wire.
    pub call_id: String,
    /// The script it runs (cut at [`KEEP_TEXT`]).
    pub command: String,
    /// Where it started.
    pub cwd: PathBuf,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// How many calls the session had made when the job started ([`SessionRecord::calls_made`]):
    /// where the job goes among the calls in a replay.
    pub after_calls: u64,
    /// `None` while it runs: a record that still says so after its agent ended is a job that
    /// agent never saw end (it was killed with the agent, or the agent crashed; it was not
    /// restarted).
    pub end: Option<CallEnd>,
    /// Set when the job was killed because its agent was ending (the client went away, or the
    /// agent was stopped): `end` then holds what it printed, but its status is the agent's kill,
    /// not the job's own end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ended_with_agent: bool,
    /// How many turns the session had recorded when the job started: where the job goes among
    /// the turns in a replay. Absent in format 1 (placed by `after_calls` alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_turns: Option<u64>,
}

/// One call of a session's history: [`CallRecord::new`], then [`SessionRecord::push_call`]
/// (what [`SessionLog::call_started`](super::SessionLog::call_started) does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallRecord {
    /// Format 1: the prompt that asked for the call (cut at [`KEEP_TEXT`]). Empty for a call of
    /// a recorded turn (the prompt is the turn's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prompt: String,
    /// The number of the turn that made the call ([`TurnRecord::number`]); `None` in format 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    /// The tool call's id on the wire.
    pub call_id: String,
    /// The command it ran (cut at [`KEEP_TEXT`]).
    pub command: String,
    /// The description the call came with, if any (cut at [`KEEP_TEXT`]).
    pub description: Option<String>,
    /// Where the command started.
    pub cwd: PathBuf,
    /// When the call started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// `None` while the call runs: a record that still says so after its agent ended is a call
    /// that agent never finished (it was not restarted).
    pub end: Option<CallEnd>,
}

/// How a call ended, and the part of its output that is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallEnd {
    /// When the call ended, in milliseconds since the Unix epoch.
    pub finished_ms: u64,
    /// The exit code, when the shell exited.
    pub exit_code: Option<i32>,
    /// The signal's name (`SIGKILL`), when the shell was killed by one.
    pub signal: Option<String>,
    /// The timeout in milliseconds, when the call was killed for running past it.
    pub timed_out_after_ms: Option<u64>,
    /// Whether the call was cancelled.
    pub cancelled: bool,
    /// Bytes the engine dropped from the middle of the output.
    pub truncated_bytes: Option<u64>,
    /// Where the whole output went, when some was dropped.
    pub full_output: Option<String>,
    /// Set when the log stopped at its cap: it holds only the first this-many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_holds_first: Option<u64>,
    /// The start of the output (all of it when short).
    pub output_head: String,
    /// The end of the output, when it was longer than head and tail together.
    pub output_tail: String,
    /// Bytes of output between head and tail that the record did not keep.
    pub omitted_bytes: u64,
    /// How long the run took, start to reaped, in milliseconds, when the engine said (absent in
    /// records written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// What the run changed in the session folder, as its edit call showed it (bounded:
    /// [`KEEP_CHANGES`]), replayed after the call's card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<crate::present::changes::ChangeView>,
}

impl CallRecord {
    /// A call `call_id` that started running `command` in `cwd` at `started_ms`, asked for by
    /// `prompt`, still running (no [`CallRecord::end`]). Texts are kept as given: cut them with
    /// [`keep_text`] first.
    pub fn new(
        prompt: impl Into<String>,
        call_id: impl Into<String>,
        command: impl Into<String>,
        cwd: impl Into<PathBuf>,
        started_ms: u64,
    ) -> Self {
        CallRecord {
            prompt: prompt.into(),
            call_id: call_id.into(),
            command: command.into(),
            description: None,
            cwd: cwd.into(),
            started_ms,
            end: None,
            turn: None,
        }
    }

    /// Sets [`CallRecord::turn`].
    pub fn turn(mut self, turn: u64) -> Self {
        self.turn = Some(turn);
        self
    }

    /// Sets [`CallRecord::description`].
    pub fn description(mut self, description: Option<String>) -> Self {
        self.description = description;
        self
    }
}

impl CallEnd {
    /// The stored form of a run's end: its status and the head and tail of `output`.
    pub fn new(finished_ms: u64, status: &RunStatus, output: &str) -> Self {
        let (exit_code, signal) = match status.exit {
            Exit::Code(code) => (Some(code), None),
            Exit::Signal(signal) => (None, Some(signal_name(signal))),
        };
        let (output_head, output_tail, omitted_bytes) =
            crate::text::head_and_tail(output, KEEP_OUTPUT_HEAD, KEEP_OUTPUT_TAIL);
        let (output_head, output_tail) = (output_head.to_string(), output_tail.to_string());
        CallEnd {
            finished_ms,
            exit_code,
            signal,
            timed_out_after_ms: status.timed_out_after.map(|d| d.as_millis() as u64),
            cancelled: status.cancelled,
            truncated_bytes: status.truncation.as_ref().map(|t| t.dropped_bytes),
            full_output: status
                .truncation
                .as_ref()
                .and_then(|t| t.full_output.clone()),
            log_holds_first: status.truncation.as_ref().and_then(|t| t.log_holds_first),
            output_head,
            output_tail,
            omitted_bytes,
            duration_ms: None,
            changes: None,
        }
    }

    /// This end, with how long the run took.
    pub fn with_duration(mut self, duration: Duration) -> Self {
        self.duration_ms = Some(duration.as_millis() as u64);
        self
    }

    /// This end, with what the run changed (kept within [`KEEP_CHANGES`]).
    pub fn with_changes(mut self, changes: Option<&crate::present::changes::ChangeView>) -> Self {
        self.changes = changes.map(|view| view.for_history(KEEP_CHANGES));
        self
    }

    /// How long the run took, when the record says.
    pub fn duration(&self) -> Option<Duration> {
        self.duration_ms.map(Duration::from_millis)
    }

    /// The status this end records (an unreadable one reads as exit code 1).
    pub fn status(&self) -> RunStatus {
        let exit = match (&self.exit_code, &self.signal) {
            (Some(code), _) => Exit::Code(*code),
            (None, Some(name)) => signal_number(name).map_or(Exit::Code(1), Exit::Signal),
            (None, None) => Exit::Code(1),
        };
        RunStatus {
            exit,
            timed_out_after: self.timed_out_after_ms.map(Duration::from_millis),
            cancelled: self.cancelled,
            truncation: self.truncated_bytes.map(|dropped_bytes| Truncation {
                dropped_bytes,
                full_output: self.full_output.clone(),
                log_holds_first: self.log_holds_first,
            }),
        }
    }

    /// The kept output: all of it, or head, a line saying how much is not kept, and tail.
    pub fn output(&self) -> String {
        if self.omitted_bytes == 0 && self.output_tail.is_empty() {
            return self.output_head.clone();
        }
        let newline = if self.output_head.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        format!(
            "{}{newline}[… {} bytes of output not kept in the session history …]\n{}",
            self.output_head, self.omitted_bytes, self.output_tail
        )
    }
}

/// `text` cut to at most `max` bytes (on a character boundary), with a note when it was cut.
pub fn keep_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let kept = crate::text::cut_at_boundary(text, max);
    format!(
        "{kept}\n[… {} more bytes not kept in the session history]",
        text.len() - kept.len()
    )
}

/// A title for a session whose first call is `command` with `description`: the description,
/// else the command's first line, shortened to 80 characters.
pub fn title_for(command: &str, description: Option<&str>) -> String {
    const MAX_CHARS: usize = 80;
    let text = description
        .filter(|d| !d.trim().is_empty())
        .unwrap_or_else(|| command.lines().next().unwrap_or(command))
        .trim();
    match text.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

impl SessionRecord {
    /// A new, empty record.
    pub fn new(id: &str, root: PathBuf, mode: &str, now_ms: u64) -> Self {
        SessionRecord {
            format: FORMAT,
            id: id.to_string(),
            cwd: root.clone(),
            root,
            mode: mode.to_string(),
            created_ms: now_ms,
            updated_ms: now_ms,
            title: None,
            calls_made: 0,
            dropped_calls: 0,
            history: Vec::new(),
            jobs_started: 0,
            dropped_jobs: 0,
            jobs: Vec::new(),
            turns_made: 0,
            dropped_turns: 0,
            turns: Vec::new(),
            shell: ShellRecord::default(),
            model: None,
            thought_level: None,
            journal: None,
        }
    }

    /// Applies `change`. Returns the number of the turn it started or added to (0 for a change
    /// that is not a turn's).
    pub fn apply(&mut self, change: Change) -> u64 {
        match change {
            Change::Turn { prompt, ms, images } => {
                let turn = self.push_turn(&prompt, ms);
                self.keep_images(images);
                turn
            }
            Change::Said { turn, text, notice } => {
                self.push_said_as(turn, &text, notice);
                turn
            }
            Change::ThoughtLevel { level, ms } => {
                self.thought_level = level;
                self.updated_ms = ms.max(self.updated_ms);
                0
            }
            Change::Call { new_turn, mut call } => {
                if let Some(prompt) = new_turn {
                    call.turn = Some(self.push_turn(&prompt, call.started_ms));
                }
                let turn = call.turn.unwrap_or(0);
                self.push_call(call);
                turn
            }
            Change::CallEnd {
                call_id,
                end,
                next_cwd,
                shell,
            } => {
                if let Some(shell) = shell {
                    self.shell = shell;
                }
                self.finish_call(&call_id, end, next_cwd);
                0
            }
            Change::Job { job } => {
                self.push_job(job);
                0
            }
            Change::JobEnd {
                call_id,
                end,
                ended_with_agent,
            } => {
                self.finish_job(&call_id, end, ended_with_agent);
                0
            }
            Change::Model { model, ms } => {
                self.model = model;
                self.updated_ms = ms.max(self.updated_ms);
                0
            }
            Change::Mode { mode, ms } => {
                self.mode = mode;
                self.updated_ms = ms.max(self.updated_ms);
                0
            }
        }
    }

    /// Adds a turn that has started with `prompt`, dropping the oldest past [`MAX_TURNS`];
    /// returns its number.
    pub fn push_turn(&mut self, prompt: &str, started_ms: u64) -> u64 {
        self.turns_made += 1;
        self.updated_ms = self.updated_ms.max(started_ms);
        self.turns.push(TurnRecord {
            number: self.turns_made,
            prompt: keep_text(prompt, KEEP_TEXT),
            started_ms,
            calls: 0,
            said: Vec::new(),
            images: Vec::new(),
        });
        self.dropped_turns += drop_oldest(&mut self.turns, MAX_TURNS);
        self.turns_made
    }

    /// Gives the last turn `images`, then keeps the record's image data within
    /// [`KEEP_IMAGE_BYTES`]: the oldest turns' images are kept by type and size only.
    pub fn keep_images(&mut self, images: Vec<ImageRecord>) {
        let Some(last) = self.turns.last_mut() else {
            return;
        };
        last.images = images;
        let kept = |turn: &TurnRecord| -> usize {
            turn.images
                .iter()
                .filter_map(|image| image.data.as_ref())
                .map(String::len)
                .sum()
        };
        let mut total: usize = self.turns.iter().map(kept).sum();
        for turn in &mut self.turns {
            if total <= KEEP_IMAGE_BYTES {
                break;
            }
            for image in &mut turn.images {
                if let Some(data) = image.data.take() {
                    total -= data.len();
                }
            }
        }
    }

    /// Adds `text` to what the agent said in turn `turn` (after the calls it made so far),
    /// within [`KEEP_TURN_TEXT`]. Returns false when the turn is not in the record.
    pub fn push_said(&mut self, turn: u64, text: &str) -> bool {
        self.push_said_as(turn, text, false)
    }

    /// [`Self::push_said`] for the agent's own notice (`notice`: never a model's words).
    pub fn push_said_as(&mut self, turn: u64, text: &str, notice: bool) -> bool {
        let Some(turn) = self.turns.iter_mut().rev().find(|t| t.number == turn) else {
            return false;
        };
        let kept: usize = turn.said.iter().map(|said| said.text.len()).sum();
        let room = KEEP_TURN_TEXT.saturating_sub(kept);
        if room == 0 {
            return true;
        }
        let text = if text.len() > room {
            keep_text(text, room)
        } else {
            text.to_string()
        };
        match turn.said.last_mut() {
            Some(last) if last.after_calls == turn.calls && last.notice == notice => {
                last.text.push_str(&text)
            }
            _ => turn.said.push(SaidRecord {
                after_calls: turn.calls,
                text,
                notice,
            }),
        }
        true
    }

    /// The number the session's next tool call (a prompt's call or a job's card) continues
    /// from: every call and job it ever made has a smaller one.
    pub fn calls_and_jobs(&self) -> u64 {
        self.calls_made + self.jobs_started
    }

    /// Adds a job that has started, dropping the oldest past [`MAX_JOBS`].
    pub fn push_job(&mut self, job: JobRecord) {
        self.jobs_started += 1;
        self.updated_ms = self.updated_ms.max(job.started_ms);
        self.jobs.push(JobRecord {
            command: keep_text(&job.command, KEEP_TEXT),
            after_calls: self.calls_made,
            // Before the first turn, the calls alone place it (as in format 1).
            after_turns: (self.turns_made > 0).then_some(self.turns_made),
            ..job
        });
        self.dropped_jobs += drop_oldest(&mut self.jobs, MAX_JOBS);
    }

    /// Records how the job whose card is `call_id` ended. Returns false when the job is not in
    /// the record (it was dropped meanwhile).
    pub fn finish_job(&mut self, call_id: &str, end: CallEnd, ended_with_agent: bool) -> bool {
        self.updated_ms = self.updated_ms.max(end.finished_ms);
        match self.jobs.iter_mut().rev().find(|j| j.call_id == call_id) {
            Some(job) => {
                job.end = Some(end);
                job.ended_with_agent = ended_with_agent;
                true
            }
            None => false,
        }
    }

    /// Adds a call that has started (not finished yet), dropping the oldest past [`MAX_CALLS`].
    /// The first call also gives the session its title.
    pub fn push_call(&mut self, call: CallRecord) {
        if self.title.is_none() {
            self.title = Some(title_for(&call.command, call.description.as_deref()));
        }
        self.calls_made += 1;
        self.updated_ms = self.updated_ms.max(call.started_ms);
        if let Some(turn) = call.turn {
            if let Some(turn) = self.turns.iter_mut().rev().find(|t| t.number == turn) {
                turn.calls += 1;
            }
        }
        self.history.push(CallRecord {
            prompt: keep_text(&call.prompt, KEEP_TEXT),
            command: keep_text(&call.command, KEEP_TEXT),
            description: call.description.map(|d| keep_text(&d, KEEP_TEXT)),
            ..call
        });
        self.dropped_calls += drop_oldest(&mut self.history, MAX_CALLS);
    }

    /// Records how the call `call_id` ended and where the session's next command starts.
    /// Returns false when the call is not in the history (it was dropped meanwhile).
    pub fn finish_call(&mut self, call_id: &str, end: CallEnd, next_cwd: PathBuf) -> bool {
        self.updated_ms = self.updated_ms.max(end.finished_ms);
        self.cwd = next_cwd;
        match self.history.iter_mut().rev().find(|c| c.call_id == call_id) {
            Some(call) => {
                call.end = Some(end);
                true
            }
            None => false,
        }
    }
}

/// Drops the oldest entries of `list` past `max`; returns how many went.
fn drop_oldest<T>(list: &mut Vec<T>, max: usize) -> u64 {
    let extra = list.len().saturating_sub(max);
    list.drain(..extra);
    extra as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(n: u64) -> CallRecord {
        CallRecord {
            turn: None,
            prompt: format!("echo {n}"),
            call_id: format!("call-{n}"),
            command: format!("echo {n}"),
            description: None,
            cwd: "/w".into(),
            started_ms: n,
            end: None,
        }
    }

    #[test]
    fn history_keeps_the_last_calls_and_counts_the_dropped_ones() {
        let mut record = SessionRecord::new("s", "/w".into(), "workspace", 0);
        for n in 1..=(MAX_CALLS as u64 + 3) {
            record.push_call(call(n));
        }
        assert_eq!(record.history.len(), MAX_CALLS);
        assert_eq!(record.history[0].call_id, "call-4");
        assert_eq!(record.dropped_calls, 3);
        assert_eq!(record.calls_made, MAX_CALLS as u64 + 3);
        assert_eq!(record.title.as_deref(), Some("echo 1"));
    }

    fn job(n: u64) -> JobRecord {
        JobRecord {
            job_id: n,
            call_id: format!("job-call-{n}"),
            command: format!("sleep {n}"),
            cwd: "/w".into(),
            started_ms: n,
            after_calls: 0,
            end: None,
            ended_with_agent: false,
            after_turns: None,
        }
    }

    #[test]
    fn jobs_are_kept_bounded_placed_among_the_calls_and_finished_by_call_id() {
        let mut record = SessionRecord::new("s", "/w".into(), "workspace", 0);
        record.push_call(call(1));
        for n in 1..=(MAX_JOBS as u64 + 2) {
            record.push_job(job(n));
        }
        assert_eq!(record.jobs.len(), MAX_JOBS);
        assert_eq!(record.jobs[0].job_id, 3);
        assert_eq!(record.dropped_jobs, 2);
        assert_eq!(record.jobs_started, MAX_JOBS as u64 + 2);
        assert_eq!(record.calls_and_jobs(), MAX_JOBS as u64 + 3);
        assert!(record.jobs.iter().all(|j| j.after_calls == 1));
        let end = CallEnd::new(99, &RunStatus::exited(4), "done\n")
            .with_duration(Duration::from_millis(1500));
        assert!(record.finish_job("job-call-5", end.clone(), false));
        assert!(
            !record.finish_job("job-call-1", end.clone(), false),
            "dropped"
        );
        let finished = record.jobs.iter().find(|j| j.job_id == 5).unwrap();
        assert_eq!(finished.end.as_ref(), Some(&end));
        assert_eq!(
            finished.end.as_ref().unwrap().duration(),
            Some(Duration::from_millis(1500))
        );
        assert!(!finished.ended_with_agent);
        assert_eq!(record.updated_ms, 99);
    }

    #[test]
    fn a_record_without_jobs_or_durations_still_reads() {
        let mut value =
            serde_json::to_value(SessionRecord::new("s", "/w".into(), "full", 1)).unwrap();
        for key in ["jobs_started", "dropped_jobs", "jobs"] {
            value.as_object_mut().unwrap().remove(key).unwrap();
        }
        let record: SessionRecord = serde_json::from_value(value).unwrap();
        assert!(record.jobs.is_empty() && record.jobs_started == 0);
        let end = serde_json::to_value(CallEnd::new(1, &RunStatus::exited(0), "")).unwrap();
        assert!(end.get("duration_ms").is_none(), "{end}");
        let end: CallEnd = serde_json::from_value(end).unwrap();
        assert_eq!(end.duration(), None);
    }

    #[test]
    fn shell_state_round_trips_every_byte_and_an_old_record_has_none() {
        use std::ffi::OsString;
        use std::os::unix::ffi::OsStringExt;
        let mut state = ShellState::default();
        state.vars.insert("TEXT".into(), Some("a\nb=c é".into()));
        state.vars.insert(
            "BYTES".into(),
            Some(OsString::from_vec(vec![0xff, 0x01, b'x'])),
        );
        state.vars.insert("GONE".into(), None);
        state.previous_dir = Some("/w/a".into());
        let mut record = SessionRecord::new("s", "/w".into(), "workspace", 1);
        record.shell = ShellRecord::of(&state);
        let json = serde_json::to_string(&record).unwrap();
        assert!(json.contains(r#""value_hex":"ff0178""#), "{json}");
        let read: SessionRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(read.shell.state(), state);

        let mut value =
            serde_json::to_value(SessionRecord::new("s", "/w".into(), "full", 1)).unwrap();
        assert!(
            value.get("shell").is_none(),
            "an empty state is not written"
        );
        value.as_object_mut().unwrap().remove("shell");
        let old: SessionRecord = serde_json::from_value(value).unwrap();
        assert!(old.shell.state().is_empty());
        let broken = ShellRecord {
            vars: vec![VarRecord {
                name: "X".into(),
                value: None,
                value_hex: Some("zz".into()),
            }],
            previous_dir: None,
        };
        assert!(broken.state().vars.is_empty());
    }

    #[test]
    fn long_output_keeps_head_and_tail_on_character_boundaries() {
        let output = format!(
            "{}{}{}",
            "é".repeat(2000),
            "x".repeat(10_000),
            "ü".repeat(2000)
        );
        let end = CallEnd::new(1, &RunStatus::exited(0), &output);
        assert!(end.output_head.len() <= KEEP_OUTPUT_HEAD && end.output_head.starts_with('é'));
        assert!(end.output_tail.len() <= KEEP_OUTPUT_TAIL && end.output_tail.ends_with('ü'));
        let kept = end.output_head.len() + end.output_tail.len();
        assert_eq!(end.omitted_bytes as usize, output.len() - kept);
        assert!(end.output().contains("bytes of output not kept"));
        let short = CallEnd::new(1, &RunStatus::exited(0), "hi\n");
        assert_eq!(short.output(), "hi\n");
    }

    #[test]
    fn status_round_trips_through_the_record() {
        let statuses = [
            RunStatus::exited(3),
            RunStatus {
                exit: Exit::Signal(9),
                timed_out_after: Some(Duration::from_millis(1500)),
                cancelled: true,
                truncation: Some(Truncation {
                    dropped_bytes: 10,
                    full_output: Some("/tmp/log".into()),
                    log_holds_first: Some(4),
                }),
            },
        ];
        for status in statuses {
            assert_eq!(CallEnd::new(0, &status, "").status(), status);
        }
    }

    #[test]
    fn titles_prefer_the_description_and_stay_short() {
        assert_eq!(title_for("make\nmake test", Some("Build")), "Build");
        assert_eq!(title_for("make\nmake test", None), "make");
        let long = "x".repeat(200);
        assert_eq!(title_for(&long, None).chars().count(), 81);
    }

    /// A prompt's images are kept whole up to 5 MiB in order (one past it by type and size
    /// only), a record's up to 10 MiB, oldest turns' first to go; a journal line written before
    /// images were kept still applies, with none.
    #[test]
    fn images_are_kept_within_their_bounds_and_old_journal_lines_apply() {
        const MIB: usize = 1 << 20;
        let a = "A".repeat(3 * MIB);
        let b = "B".repeat(2 * MIB);
        let c = "C".repeat(4);
        let images = ImageRecord::of_prompt([
            ("image/png", a.as_str()),
            ("image/png", b.as_str()),
            ("image/gif", c.as_str()),
        ]);
        let kept: Vec<Option<usize>> = images
            .iter()
            .map(|i| i.data.as_ref().map(String::len))
            .collect();
        assert_eq!(kept, [Some(3 * MIB), Some(2 * MIB), None]);
        assert_eq!(images[2].bytes, 4);
        let mut record = SessionRecord::new("s", "/w".into(), "workspace", 0);
        record.apply(Change::Turn {
            prompt: "one".into(),
            ms: 1,
            images,
        });
        let five = "D".repeat(5 * MIB);
        record.apply(Change::Turn {
            prompt: "two".into(),
            ms: 2,
            images: ImageRecord::of_prompt([("image/png", five.as_str())]),
        });
        // 10 MiB exactly: all kept; 8 bytes more: the first turn's images go, whole.
        assert!(record.turns[0].images[0].data.is_some());
        let line = r#"{"op":"turn","prompt":"three","ms":3}"#;
        let old: Change = serde_json::from_str(line).unwrap();
        record.apply(old);
        assert!(record.turns[2].images.is_empty());
        record.apply(Change::Turn {
            prompt: "four".into(),
            ms: 4,
            images: ImageRecord::of_prompt([("image/png", "EEEEEEEE")]),
        });
        let kept: Vec<Vec<bool>> = record
            .turns
            .iter()
            .map(|t| t.images.iter().map(|i| i.data.is_some()).collect())
            .collect();
        assert_eq!(
            kept,
            [vec![false, false, false], vec![true], vec![], vec![true]]
        );
        // What a record keeps survives its JSON.
        let json = serde_json::to_string(&record).unwrap();
        assert_eq!(
            serde_json::from_str::<SessionRecord>(&json).unwrap(),
            record
        );
    }
}
