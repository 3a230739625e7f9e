//! The replay of a stored session: the `session/update`s that `session/load` sends before it
//! answers, built from a [`SessionRecord`] with the bridge's own mapping, so a replayed call
//! looks like the live one did (a card with its output and exit for card clients, the console
//! block for the others).
//!
//! Owns: the order (turns and background jobs as they started; per turn: its prompt once as
//! `user_message_chunk`, each of its kept images as one more (a line for an image the record
//! kept by type and size only), then the agent's text and the turn's calls in the order they came; per
//! call or job, through the same sequencer as the live call (`call_wire`): the `tool_call`, the
//! kept output on the card path (then the card's status line), the final update with the
//! recorded duration; a format-1 record's calls are each a turn of their own, as their prompt
//! was kept with them), and what is said instead of faked: calls and jobs the record no
//! longer keeps, and calls and jobs whose agent ended while they ran (shown as ended with it,
//! never restarted). Pure: no I/O. Must not touch: the record's shape (the store's), sending.

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, ImageContent, SessionUpdate, ToolCallId,
};

use super::bridge::ClientFeatures;
use super::call_wire::CallWire;
use crate::present::stream::StreamLimits;
use crate::present::{ansi, console_block, present_call, present_ended, CallView, ResultView};
use crate::store::{CallEnd, CallRecord, JobRecord, SessionRecord, TurnRecord};
use crate::tool::BashCall;

/// What a replayed call that its agent never finished says.
pub const ENDED_WITH_THE_AGENT: &str = "[ended with the agent: the acp-bash process that ran this \
     command exited before it finished; it was not restarted]";

/// What a replayed background job that was running when its agent ended says (instead of a
/// status line: how it ended is not known, or is only the agent's kill).
pub const JOB_ENDED_WITH_THE_AGENT: &str = "[ended with the agent: the acp-bash process that ran \
     this job exited while it ran; the job was not restarted]";

/// The updates that replay `record` to a client with `features`: calls and background jobs in
/// the order they started.
///
/// `running_here(call_id)` says whether this process is still running that call or job (a
/// session loaded again on the connection that runs it): such a call or job is replayed as
/// started only, and its live updates follow.
pub fn replay(
    record: &SessionRecord,
    features: ClientFeatures,
    running_here: impl Fn(&str) -> bool,
) -> Vec<SessionUpdate> {
    let face = Face {
        features,
        v2: false,
    };
    replay_on(record, face, running_here)
        .into_iter()
        .filter_map(|update| match update {
            Replayed::V1(update) => Some(update),
            Replayed::V2(update) => {
                tracing::error!(?update, "a v2 update in a v1 replay: left out");
                None
            }
        })
        .collect()
}

/// One update of a replay: the v1 updates every face shares (the prompt, the agent's text),
/// and on the v2 face each call's terminal and tool call updates.
#[derive(Debug, Clone)]
pub enum Replayed {
    /// A v1 update (on the v2 face: a prompt or an agent text, which the face words as v2).
    V1(SessionUpdate),
    /// A v2 update: a replayed call's terminal (announced, its one `output` snapshot, its
    /// exit) or tool call.
    V2(agent_client_protocol::v2::schema::SessionUpdate),
}

/// [`replay`] for the ACP v2 face: each call and job is an agent-owned terminal with one
/// `output` snapshot (through the same sequencer, [`CallWire::open_v2`]).
pub fn replay_v2(record: &SessionRecord, running_here: impl Fn(&str) -> bool) -> Vec<Replayed> {
    let face = Face {
        features: ClientFeatures::CARD,
        v2: true,
    };
    replay_on(record, face, running_here)
}

/// Which face a replay is for.
#[derive(Debug, Clone, Copy)]
struct Face {
    features: ClientFeatures,
    v2: bool,
}

/// Keeps a replayed call's updates, v1 and v2, in order.
struct Collect<'a>(&'a mut Vec<Replayed>);

impl super::call_wire::UpdateSink for Collect<'_> {
    fn send(&mut self, update: SessionUpdate) {
        self.0.push(Replayed::V1(update));
    }

    fn send_v2(&mut self, update: agent_client_protocol::v2::schema::SessionUpdate) {
        self.0.push(Replayed::V2(update));
    }
}

fn replay_on(
    record: &SessionRecord,
    face: Face,
    running_here: impl Fn(&str) -> bool,
) -> Vec<Replayed> {
    let mut updates = Vec::new();
    if record.dropped_calls > 0 {
        updates.push(Replayed::V1(agent_text(&format!(
            "({} earlier calls of this session are not kept in its history.)",
            record.dropped_calls
        ))));
    }
    if record.dropped_jobs > 0 {
        updates.push(Replayed::V1(agent_text(&format!(
            "({} earlier background jobs of this session are not kept in its history.)",
            record.dropped_jobs
        ))));
    }
    if record.dropped_turns > 0 {
        updates.push(Replayed::V1(agent_text(&format!(
            "({} earlier turns of this session are not kept in its history.)",
            record.dropped_turns
        ))));
    }
    // Format 1: calls with their own prompt, and the jobs placed among them by call count.
    let mut legacy_jobs: Vec<&JobRecord> = record
        .jobs
        .iter()
        .filter(|job| job.after_turns.is_none())
        .collect();
    legacy_jobs.sort_by_key(|job| job.after_calls);
    let mut legacy_jobs = legacy_jobs.into_iter().peekable();
    for (n, call) in (record.dropped_calls + 1..).zip(&record.history) {
        if call.turn.is_some() {
            continue;
        }
        // The jobs started before call number `n` (counting from the session's first call).
        while let Some(job) = legacy_jobs.next_if(|job| job.after_calls < n) {
            replay_job(job, face, &running_here, &mut updates);
        }
        replay_call(call, Some(&call.prompt), face, &running_here, &mut updates);
    }
    for job in legacy_jobs {
        replay_job(job, face, &running_here, &mut updates);
    }
    // Turns, with the jobs placed among them by turn count.
    let mut jobs: Vec<&JobRecord> = record
        .jobs
        .iter()
        .filter(|job| job.after_turns.is_some())
        .collect();
    jobs.sort_by_key(|job| job.after_turns);
    let mut jobs = jobs.into_iter().peekable();
    for turn in &record.turns {
        while let Some(job) = jobs.next_if(|job| job.after_turns < Some(turn.number)) {
            replay_job(job, face, &running_here, &mut updates);
        }
        replay_turn(record, turn, face, &running_here, &mut updates);
    }
    for job in jobs {
        replay_job(job, face, &running_here, &mut updates);
    }
    updates
}

/// A turn: its prompt once, then what the agent said and the calls it made, in order. Calls
/// the history no longer keeps (the oldest) are left out; the text around them stays.
fn replay_turn(
    record: &SessionRecord,
    turn: &TurnRecord,
    face: Face,
    running_here: &impl Fn(&str) -> bool,
    updates: &mut Vec<Replayed>,
) {
    updates.push(Replayed::V1(SessionUpdate::UserMessageChunk(
        ContentChunk::new(turn.prompt.clone().into()),
    )));
    // Its images, each as the user gave it, or a line where the record kept its type only.
    for image in &turn.images {
        let content = match &image.data {
            Some(data) => ContentBlock::Image(ImageContent::new(data, &image.mime_type)),
            None => format!(
                "(An image of type {}, {} KiB, given here is not kept in this session's \
                 history: a prompt's images are kept up to {} MiB, a session's up to {} MiB, \
                 newest first.)",
                image.mime_type,
                image.bytes / 1024,
                crate::store::record::KEEP_PROMPT_IMAGE_BYTES >> 20,
                crate::store::record::KEEP_IMAGE_BYTES >> 20,
            )
            .into(),
        };
        updates.push(Replayed::V1(SessionUpdate::UserMessageChunk(
            ContentChunk::new(content),
        )));
    }
    let calls: Vec<&CallRecord> = record
        .history
        .iter()
        .filter(|call| call.turn == Some(turn.number))
        .collect();
    let missing = turn.calls.saturating_sub(calls.len() as u64);
    let mut said = turn.said.iter().peekable();
    for (index, call) in (missing..).zip(calls) {
        while let Some(said) = said.next_if(|said| said.after_calls <= index) {
            updates.push(Replayed::V1(agent_text(&said.text)));
        }
        replay_call(call, None, face, running_here, updates);
    }
    for said in said {
        updates.push(Replayed::V1(agent_text(&said.text)));
    }
}

fn agent_text(text: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(text.to_string().into()))
}

/// How a replayed call or job ended.
enum Ending<'a> {
    /// Its recorded end: replayed with its status.
    Ended(&'a CallEnd),
    /// It ended with its agent: `said` instead of a status, after what it printed (if known).
    WithTheAgent {
        printed: Option<&'a CallEnd>,
        said: &'static str,
    },
}

/// The prompt (when it has its own), the `tool_call`, then (unless it has no recorded end and is
/// `running_here`) the kept output on the card path and the final update.
#[allow(clippy::too_many_arguments)]
fn replay_one(
    prompt: Option<&str>,
    call_id: &str,
    command: &str,
    view: &CallView,
    ending: Ending<'_>,
    face: Face,
    running_here: &impl Fn(&str) -> bool,
    updates: &mut Vec<Replayed>,
) {
    let id = ToolCallId::new(call_id.to_string());
    let edit_id = id.clone();
    if let Some(prompt) = prompt {
        updates.push(Replayed::V1(SessionUpdate::UserMessageChunk(
            ContentChunk::new(prompt.to_string().into()),
        )));
    }
    // The same sequencer as the live call: a replayed call looks like the live one did.
    let features = face.features;
    let live_here = !matches!(ending, Ending::Ended(_)) && running_here(call_id);
    let mut sink = Collect(updates);
    let mut wire = if face.v2 {
        CallWire::open_v2_as(
            id,
            command,
            view.clone(),
            StreamLimits::default(),
            live_here,
            &mut sink,
        )
    } else {
        CallWire::open(
            id,
            command,
            view.clone(),
            features,
            StreamLimits::default(),
            &mut sink,
        )
    };
    // Only one that has not ended in the record: a live update may follow the recorded end,
    // but nothing would follow a skipped one.
    if live_here {
        return;
    }
    let printed = match &ending {
        Ending::Ended(end) => Some(*end),
        Ending::WithTheAgent { printed, .. } => *printed,
    };
    let output = printed.map(CallEnd::output).unwrap_or_default();
    wire.recorded_output(&mut sink, &output);
    let (status, presented) = match ending {
        Ending::Ended(end) => {
            let status = end.status();
            let presented = present_ended(&view.cwd, &view.echo, &output, &status, end.duration());
            (Some(status), presented)
        }
        // The card already shows the output; a console block must show it too.
        Ending::WithTheAgent { said, .. } if features.card() || output.is_empty() => (
            None,
            ResultView::Text {
                console: console_block(said),
            },
        ),
        Ending::WithTheAgent { said, .. } => {
            let plain = ansi::to_plain_text(&output);
            let newline = if plain.ends_with('\n') { "" } else { "\n" };
            (
                None,
                ResultView::Text {
                    console: console_block(&format!("{plain}{newline}{said}")),
                },
            )
        }
    };
    wire.end(&mut sink, status.as_ref(), &presented, false);
    // What it changed, as its edit call showed it, after its card (as live).
    if let Some(view) = printed.and_then(|end| end.changes.as_ref()) {
        use super::call_wire::UpdateSink;
        match face.v2 {
            true => sink.send_v2(super::changes_card::changes_call_v2(&edit_id, view)),
            false => sink.send(super::changes_card::changes_call(&edit_id, view, features)),
        }
    }
}

fn replay_call(
    call: &CallRecord,
    prompt: Option<&str>,
    face: Face,
    running_here: &impl Fn(&str) -> bool,
    updates: &mut Vec<Replayed>,
) {
    let mut bash = BashCall::new(call.command.clone());
    bash.description = call.description.clone();
    let view = present_call(&bash, &call.cwd);
    let ending = match &call.end {
        Some(end) => Ending::Ended(end),
        None => Ending::WithTheAgent {
            printed: None,
            said: ENDED_WITH_THE_AGENT,
        },
    };
    replay_one(
        prompt,
        &call.call_id,
        &call.command,
        &view,
        ending,
        face,
        running_here,
        updates,
    );
}

/// A job as its card: the `/bg` prompt that started it, its `tool_call`, its output and end.
/// A job that was running when its agent ended (no end recorded, or killed by the ending agent)
/// says so, with a failed status and no exit code: it is shown, never restarted.
fn replay_job(
    job: &JobRecord,
    face: Face,
    running_here: &impl Fn(&str) -> bool,
    updates: &mut Vec<Replayed>,
) {
    let view = present_call(&BashCall::new(job.command.clone()), &job.cwd);
    let ending = match &job.end {
        Some(end) if !job.ended_with_agent => Ending::Ended(end),
        printed => Ending::WithTheAgent {
            printed: printed.as_ref(),
            said: JOB_ENDED_WITH_THE_AGENT,
        },
    };
    replay_one(
        Some(&format!("/bg {}", job.command)),
        &job.call_id,
        &job.command,
        &view,
        ending,
        face,
        running_here,
        updates,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::RunStatus;
    use serde_json::{json, Value};

    const ZED: ClientFeatures = ClientFeatures::CARD;
    const PLAIN: ClientFeatures = ClientFeatures::PLAIN;

    fn record() -> SessionRecord {
        let mut record = SessionRecord::new("s", "/w".into(), "workspace", 1);
        for (n, end) in [(1, Some(0)), (2, None)] {
            record.push_call(CallRecord {
                turn: None,
                prompt: format!("# Say {n}\necho {n}"),
                call_id: format!("call-{n}"),
                command: format!("echo {n}"),
                description: Some(format!("Say {n}")),
                cwd: "/w".into(),
                started_ms: n,
                end: end.map(|code| CallEnd::new(n, &RunStatus::exited(code), &format!("{n}\n"))),
            });
        }
        record
    }

    fn kinds(updates: &[SessionUpdate]) -> Vec<Value> {
        updates
            .iter()
            .map(|u| serde_json::to_value(u).unwrap()["sessionUpdate"].clone())
            .collect()
    }

    #[test]
    fn card_replay_has_prompt_call_output_and_exit() {
        let updates = replay(&record(), ZED, |_| false);
        assert_eq!(
            kinds(&updates),
            json!([
                "user_message_chunk",
                "tool_call",
                "tool_call_update",
                "tool_call_update",
                "user_message_chunk",
                "tool_call",
                "tool_call_update"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let output = serde_json::to_value(&updates[2]).unwrap();
        assert_eq!(output["_meta"]["terminal_output"]["data"], "1\n");
        let exit = serde_json::to_value(&updates[3]).unwrap();
        assert_eq!(exit["_meta"]["terminal_exit"]["exit_code"], 0);
        assert_eq!(exit["status"], "completed");
        let ended = serde_json::to_value(&updates[6]).unwrap();
        assert_eq!(ended["status"], "failed");
        assert!(
            ended.to_string().contains("ended with the agent"),
            "{ended}"
        );
    }

    #[test]
    fn plain_replay_has_the_console_block() {
        let updates = replay(&record(), PLAIN, |_| false);
        assert_eq!(updates.len(), 6);
        let done = serde_json::to_value(&updates[2]).unwrap();
        assert_eq!(
            done["content"][1]["content"]["text"],
            "```console\n1\n[exit code: 0]\n```"
        );
    }

    /// Call 1, then three jobs (exited 4 after 1.5 s; no end: its agent died; killed by its
    /// ending agent after printing), then call 2 (still running: its agent died too).
    fn record_with_jobs() -> SessionRecord {
        let mut record = record();
        let call_2 = record.history.pop().unwrap();
        record.calls_made = 1;
        let ends = [
            Some((
                false,
                CallEnd::new(5, &RunStatus::exited(4), "built\n")
                    .with_duration(std::time::Duration::from_millis(1500)),
            )),
            None,
            Some((true, CallEnd::new(6, &RunStatus::exited(143), "serving"))),
        ];
        for (n, end) in (1..).zip(ends) {
            record.push_job(JobRecord {
                job_id: n,
                call_id: format!("call-1-{}", n + 1),
                command: format!("job {n}"),
                cwd: "/w".into(),
                started_ms: 2,
                after_calls: 0,
                end: None,
                ended_with_agent: false,
                after_turns: None,
            });
            if let Some((with_agent, end)) = end {
                record.finish_job(&format!("call-1-{}", n + 1), end, with_agent);
            }
        }
        record.push_call(call_2);
        record
    }

    fn final_of(updates: &[SessionUpdate], call_id: &str) -> Value {
        updates
            .iter()
            .map(|u| serde_json::to_value(u).unwrap())
            .rfind(|u| u["toolCallId"] == call_id && u["status"].is_string())
            .unwrap_or_else(|| panic!("no final update for {call_id}"))
    }

    #[test]
    fn jobs_replay_among_the_calls_with_their_end_or_as_ended_with_the_agent() {
        let record = record_with_jobs();
        let updates = replay(&record, ZED, |_| false);
        let prompts: Vec<Value> = updates
            .iter()
            .map(|u| serde_json::to_value(u).unwrap())
            .filter(|u| u["sessionUpdate"] == "user_message_chunk")
            .map(|u| u["content"]["text"].clone())
            .collect();
        assert_eq!(
            prompts,
            json!([
                "# Say 1\necho 1",
                "/bg job 1",
                "/bg job 2",
                "/bg job 3",
                "# Say 2\necho 2"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let exited = final_of(&updates, "call-1-2");
        assert_eq!(exited["status"], "failed");
        assert_eq!(exited["_meta"]["terminal_exit"]["exit_code"], 4);
        assert_eq!(exited["rawOutput"]["duration_ms"], 1500);
        for (call, printed) in [("call-1-3", None), ("call-1-4", Some("serving"))] {
            let ended = final_of(&updates, call);
            assert_eq!(ended["status"], "failed", "{ended}");
            assert!(ended.get("_meta").is_none(), "no exit is made up: {ended}");
            assert_eq!(ended["rawOutput"]["exit_code"], Value::Null, "{ended}");
            assert!(
                ended.to_string().contains("the job was not restarted"),
                "{ended}"
            );
            let output = updates
                .iter()
                .map(|u| serde_json::to_value(u).unwrap())
                .find(|u| u["toolCallId"] == call && u["_meta"]["terminal_output"].is_object());
            assert_eq!(
                output.map(|u| u["_meta"]["terminal_output"]["data"].clone()),
                printed.map(Value::from)
            );
        }
    }

    #[test]
    fn plain_job_replay_has_the_console_block() {
        let updates = replay(&record_with_jobs(), PLAIN, |_| false);
        let console =
            |call: &str| final_of(&updates, call)["content"][0]["content"]["text"].clone();
        assert_eq!(
            console("call-1-2"),
            "```console\nbuilt\n[exit code: 4]\n```"
        );
        assert_eq!(
            console("call-1-3"),
            format!("```console\n{JOB_ENDED_WITH_THE_AGENT}\n```")
        );
        assert_eq!(
            console("call-1-4"),
            format!("```console\nserving\n{JOB_ENDED_WITH_THE_AGENT}\n```")
        );
    }

    #[test]
    fn a_job_whose_card_is_live_here_is_replayed_as_started_only() {
        let updates = replay(&record_with_jobs(), PLAIN, |id| id == "call-1-3");
        let job: Vec<Value> = updates
            .iter()
            .map(|u| serde_json::to_value(u).unwrap())
            .filter(|u| u["toolCallId"] == "call-1-3")
            .collect();
        assert_eq!(job.len(), 1);
        assert_eq!(job[0]["sessionUpdate"], "tool_call");
    }

    #[test]
    fn an_end_in_the_record_is_replayed_even_while_its_card_is_live_here() {
        // Its final update may already have gone out live: a replay without it would leave the
        // client's card running for ever.
        let updates = replay(&record_with_jobs(), PLAIN, |id| {
            id == "call-1-2" || id == "call-1"
        });
        assert_eq!(final_of(&updates, "call-1-2")["status"], "failed");
        assert_eq!(final_of(&updates, "call-1")["status"], "completed");
    }

    #[test]
    fn a_call_still_running_here_is_replayed_as_started_only() {
        let updates = replay(&record(), PLAIN, |id| id == "call-2");
        assert_eq!(updates.len(), 5);
    }
}
