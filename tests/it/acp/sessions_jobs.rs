//! Background jobs in the session store: a job is recorded when it starts and when it ends, and
//! `session/load` (by a second agent process over the same `--state-dir`) replays it as its card
//! or console block. A job that finished replays with its real exit; a job that was running when
//! its agent ended (SIGKILL: no cleanup ran; or stdin EOF: the agent killed it on the way out)
//! replays as ended with the agent, and is never restarted. Every wire line is validated against
//! the ACP schema.

use std::path::{Path, PathBuf};

use acp_bash::acp::client::{ClientProfile, Conversation};
use agent_client_protocol::v1::schema::{SessionId, SessionUpdate, StopReason};
use serde_json::{json, Value};

use super::sessions::{normalized, ok, session_of, with_agent};
use super::shutdown::RawAgent;
use crate::support::acp::*;
use crate::support::schema::{Direction, WireValidator};

/// The first agent, on raw pipes (so that the test can SIGKILL it), every line validated.
struct FirstAgent {
    agent: RawAgent,
    wire: WireValidator,
    next_id: u64,
}

impl FirstAgent {
    fn spawn(state: &Path) -> Self {
        let state = state.to_str().unwrap();
        FirstAgent {
            agent: RawAgent::spawn(&["--sandbox", "full", "--state-dir", state]),
            wire: WireValidator::default(),
            next_id: 1,
        }
    }

    /// Sends request `method` and returns its id.
    async fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let line = serde_json::to_string(&request).unwrap();
        self.wire.check(Direction::ClientToAgent, &line).unwrap();
        self.agent.send(request).await;
        id
    }

    /// Reads (and validates) what the agent writes until `found` holds for a message.
    async fn until(&mut self, mut found: impl FnMut(&Value) -> bool) -> Value {
        loop {
            let line = self
                .agent
                .next_line()
                .await
                .expect("the agent's stdout closed");
            self.wire.check(Direction::AgentToClient, &line).unwrap();
            let value: Value = serde_json::from_str(&line).unwrap();
            if found(&value) {
                return value;
            }
        }
    }

    async fn answer(&mut self, id: u64) -> Value {
        self.until(|v| v["id"] == id).await
    }

    async fn prompt(&mut self, session: &str, text: &str) -> u64 {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }
}

fn update_of(message: &Value) -> &Value {
    &message["params"]["update"]
}

/// A session update that ends a tool call (it has a status other than `in_progress`).
fn is_final(message: &Value) -> bool {
    let status = &update_of(message)["status"];
    update_of(message)["sessionUpdate"] == "tool_call_update"
        && status.is_string()
        && status != "in_progress"
}

/// What the first agent left: its session, the shell pid of the job it was running when it was
/// SIGKILLed, and the process name that job's `sleep` runs under.
struct Killed {
    session: SessionId,
    job_pid: i32,
    name: String,
    /// A file the running job would write if its shell ever got past its `sleep`.
    later: PathBuf,
}

/// Agent 1 (in `dir`, sessions in `state`): job 1 prints and exits 4 (and its end is seen),
/// a plain call, then job 2 that sleeps; then agent 1 is SIGKILLed while job 2 runs. Returns
/// once job 2's processes are gone.
async fn job_running_when_its_agent_is_killed(dir: &Path, state: &Path) -> Killed {
    let name = process_name(dir);
    let later = dir.join("later");
    let mut agent = FirstAgent::spawn(state);
    let init = agent
        .request("initialize", json!({"protocolVersion": 1}))
        .await;
    agent.answer(init).await;
    let new = agent
        .request("session/new", json!({"cwd": dir, "mcpServers": []}))
        .await;
    let session = agent.answer(new).await["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();

    // Job 1 runs to its end; the prompt's answer and the card's final update may come in either
    // order.
    let bg = agent.prompt(&session, "/bg echo built; exit 4").await;
    let (mut answered, mut ended) = (false, false);
    agent
        .until(|m| {
            answered |= m["id"] == bg;
            ended |= is_final(m);
            answered && ended
        })
        .await;
    let call = agent.prompt(&session, "echo between").await;
    agent.answer(call).await;

    // Job 2: its shell waits for a sleep named `name`, then would write `later`.
    let script = format!("/bg (exec -a {name} sleep 60); touch {}", later.display());
    let bg = agent.prompt(&session, &script).await;
    let started = agent
        .until(|m| update_of(m)["sessionUpdate"] == "agent_message_chunk")
        .await;
    let said = update_of(&started)["content"]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let job_pid: i32 = regex::Regex::new(r"Started job 2 \(pid (\d+)\)")
        .unwrap()
        .captures(&said)
        .unwrap_or_else(|| panic!("{said}"))[1]
        .parse()
        .unwrap();
    assert_eq!(agent.answer(bg).await["result"]["stopReason"], "end_turn");
    wait_for_process(&name).await;

    agent.agent.child.start_kill().unwrap(); // SIGKILL: no cleanup code runs
    agent.agent.wait("the killed agent").await;
    assert!(
        wait_until_no_process(&name).await,
        "the job's sleep died with its agent"
    );
    guard("the job's shell dies with its agent", async {
        while process_alive(job_pid) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    Killed {
        session: SessionId::new(session),
        job_pid,
        name,
        later,
    }
}

/// Loads `session` in a second agent and, after the replay, asks `/jobs` and runs a command
/// (whose call id must be new: jobs' cards count as calls). Returns the replay, the `/jobs`
/// answer, and the normalised transcript.
async fn loaded(
    profile: ClientProfile,
    dir: &Path,
    state: &Path,
    session: &SessionId,
) -> (Vec<SessionUpdate>, String, String) {
    let ((replayed, jobs), transcript) = with_agent(profile, state, "load", async |mut c| {
        let (_, replayed) = c.load_session(session, dir).await?;
        let jobs = agent_says(&mut c, session, "/jobs").await;
        let after = ok(&mut c, session, "true").await;
        let new_id = tool_call(&after).tool_call_id.0.to_string();
        assert!(!calls(&replayed).contains(&new_id), "{new_id} was replayed");
        Ok((replayed, jobs))
    })
    .await;
    let session = session_of(&transcript);
    (replayed, jobs, normalized(&transcript, dir, &session))
}

async fn agent_says(c: &mut Conversation, session: &SessionId, text: &str) -> String {
    ok(c, session, text)
        .await
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(chunk) => serde_json::to_value(&chunk.content)
                .unwrap()["text"]
                .as_str()
                .map(str::to_string),
            _ => None,
        })
        .collect()
}

/// The prompts replayed, in order.
fn prompts(replayed: &[SessionUpdate]) -> Vec<String> {
    replayed
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::UserMessageChunk(chunk) => serde_json::to_value(&chunk.content).unwrap()
                ["text"]
                .as_str()
                .map(str::to_string),
            _ => None,
        })
        .collect()
}

/// The replayed tool call ids, in order.
fn calls(replayed: &[SessionUpdate]) -> Vec<String> {
    replayed
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCall(call) => Some(call.tool_call_id.0.to_string()),
            _ => None,
        })
        .collect()
}

/// The final update of call `id` (the last update with a status).
fn final_of(replayed: &[SessionUpdate], id: &str) -> Value {
    replayed
        .iter()
        .map(|u| serde_json::to_value(u).unwrap())
        .rfind(|u| u["toolCallId"] == id && u["status"].is_string())
        .unwrap_or_else(|| panic!("no final update for {id}"))
}

const NO_JOBS: &str = "No background jobs in this session. Start one with `/bg SCRIPT`.";

fn snapshot(name: &str, transcript: &str) {
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(name, transcript);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_running_when_its_agent_was_killed_replays_as_ended_with_it_and_is_not_restarted() {
    let (_tmp, dir) = temp_dir();
    let state = dir.join(".state");
    let killed = job_running_when_its_agent_is_killed(&dir, &state).await;
    let (replayed, jobs, transcript) =
        loaded(ClientProfile::Zed, &dir, &state, &killed.session).await;

    // The jobs replay where they started among the calls, each with the prompt that started it.
    let script = format!(
        "/bg (exec -a {} sleep 60); touch {}",
        killed.name,
        killed.later.display()
    );
    assert_eq!(
        prompts(&replayed),
        ["/bg echo built; exit 4", "echo between", script.as_str()]
    );
    let zed = zed_replay(&replayed);
    assert_eq!(zed.problems(), &[] as &[String]);
    let ids = calls(&replayed);
    assert_eq!(ids.len(), 3);
    // Job 2 never got an end: its card says it ended with the agent, fails, and makes up no
    // exit.
    let card = zed.card(&ids[2]).expect("the killed job's card");
    assert_eq!(card.status, "failed", "{card:?}");
    assert!(!card.exited && card.exit_code.is_none(), "{card:?}");
    assert!(
        card.texts
            .iter()
            .any(|t| t.contains("[ended with the agent:") && t.contains("not restarted")),
        "{card:?}"
    );
    assert_eq!(card.cwd.as_deref(), dir.to_str());
    // Nothing was restarted: no job runs in the loaded session, its processes are gone, and
    // what its shell would have done next never happened.
    assert_eq!(jobs, NO_JOBS);
    assert!(processes_named(&killed.name).is_empty());
    assert!(!process_alive(killed.job_pid));
    assert!(!killed.later.exists(), "the job's shell never went on");
    snapshot(
        "sessions__zed_load_jobs",
        &transcript.replace(&killed.name, "[NAME]"),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_finished_before_its_agent_was_killed_replays_with_its_real_exit() {
    let (_tmp, dir) = temp_dir();
    let state = dir.join(".state");
    let killed = job_running_when_its_agent_is_killed(&dir, &state).await;
    let (replayed, _, _) = loaded(ClientProfile::Zed, &dir, &state, &killed.session).await;
    let zed = zed_replay(&replayed);
    let ids = calls(&replayed);
    let job = zed.card(&ids[0]).expect("the finished job's card");
    assert_eq!(job.output, "built\n");
    assert!(job.exited && job.exit_code == Some(4), "{job:?}");
    assert_eq!(job.status, "failed");
    let raw = &final_of(&replayed, &ids[0])["rawOutput"];
    assert_eq!(raw["exit_code"], 4);
    assert!(raw["duration_ms"].is_u64(), "the recorded duration: {raw}");
    // The call between the jobs, for comparison.
    let call = zed.card(&ids[1]).expect("the call's card");
    assert!(call.output == "between\n" && call.exit_code == Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_clients_get_the_jobs_console_blocks_on_load() {
    let (_tmp, dir) = temp_dir();
    let state = dir.join(".state");
    let killed = job_running_when_its_agent_is_killed(&dir, &state).await;
    let (replayed, jobs, transcript) =
        loaded(ClientProfile::Plain, &dir, &state, &killed.session).await;
    let ids = calls(&replayed);
    let console = |id: &str| {
        let update = final_of(&replayed, id);
        let content = update["content"].as_array().unwrap();
        content.last().unwrap()["content"]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(console(&ids[0]), "```console\nbuilt\n[exit code: 4]\n```");
    assert_eq!(
        console(&ids[2]),
        "```console\n[ended with the agent: the acp-bash process that ran this job exited while \
         it ran; the job was not restarted]\n```"
    );
    assert_eq!(final_of(&replayed, &ids[2])["status"], "failed");
    assert!(replayed
        .iter()
        .all(|u| !matches!(u, SessionUpdate::ToolCallUpdate(x) if x.meta.is_some())));
    assert_eq!(jobs, NO_JOBS);
    snapshot(
        "sessions__plain_load_jobs",
        &transcript.replace(&killed.name, "[NAME]"),
    );
}

/// The client goes away (stdin EOF) while a job runs: the agent kills the job on its way out,
/// and records it as ended with the agent, with what it printed.
#[tokio::test]
async fn a_job_the_agent_killed_on_its_way_out_replays_as_ended_with_it_after_its_output() {
    let (_tmp, dir) = temp_dir();
    let state = dir.join(".state");
    let name = process_name(&dir);
    let (session, _) = with_agent(ClientProfile::Plain, &state, "make", async |mut c| {
        let session = c.new_session(&dir).await?;
        let started = c
            .prompt(
                &session,
                &format!("/bg echo serving; exec -a {name} sleep 60"),
            )
            .await?;
        assert_eq!(started.stop_reason, StopReason::EndTurn);
        wait_for_process(&name).await;
        Ok(session)
    })
    .await;
    assert!(wait_until_no_process(&name).await, "killed with the agent");
    let (replayed, jobs, _) = loaded(ClientProfile::Plain, &dir, &state, &session).await;
    let id = &calls(&replayed)[0];
    let update = final_of(&replayed, id);
    assert_eq!(update["status"], "failed");
    assert_eq!(
        update["content"][0]["content"]["text"],
        "```console\nserving\n[ended with the agent: the acp-bash process that ran this job \
         exited while it ran; the job was not restarted]\n```"
    );
    assert_eq!(jobs, NO_JOBS);
    assert!(processes_named(&name).is_empty(), "not restarted");
}
