//! Sessions that outlive the agent: `session/list`, `session/load` (with its replay),
//! `session/resume`, `session/close`, `session/delete`, and `--no-history`. Real binary, real
//! pipes; most tests use two agent processes one after the other on one state directory, so
//! every load is a load by a process that did not make the session. Every wire line is
//! validated against the ACP schema.

use std::path::{Path, PathBuf};

use acp_bash::acp::client::{AcpClient, ClientProfile, Conversation, Transcript};
use agent_client_protocol::v1::schema::{
    CloseSessionRequest, DeleteSessionRequest, ListSessionsRequest, ListSessionsResponse,
    ResumeSessionRequest, SessionId, SessionUpdate, SetSessionModeRequest, StopReason,
};
use agent_client_protocol::ErrorCode;
use serde_json::Value;

use crate::support::acp::*;
use crate::support::schema::{Direction, WireValidator};

/// Runs `conversation` with an agent keeping its sessions in `state`, then validates the wire.
pub(super) async fn with_agent<R>(
    profile: ClientProfile,
    state: &Path,
    what: &str,
    conversation: impl AsyncFnOnce(Conversation) -> agent_client_protocol::Result<R>,
) -> (R, Transcript) {
    run_client(client_with_store(profile, state), what, conversation).await
}

async fn run_client<R>(
    client: AcpClient,
    what: &str,
    conversation: impl AsyncFnOnce(Conversation) -> agent_client_protocol::Result<R>,
) -> (R, Transcript) {
    converse_with(client, what, conversation).await
}

async fn list(
    c: &Conversation,
    cwd: Option<&Path>,
    cursor: Option<String>,
) -> agent_client_protocol::Result<ListSessionsResponse> {
    c.connection()
        .send_request(
            ListSessionsRequest::new()
                .cwd(cwd.map(Path::to_path_buf))
                .cursor(cursor),
        )
        .block_task()
        .await
}

fn listed_ids(response: &ListSessionsResponse) -> Vec<String> {
    response
        .sessions
        .iter()
        .map(|s| s.session_id.0.to_string())
        .collect()
}

pub(super) async fn ok(
    c: &mut Conversation,
    session: &SessionId,
    script: &str,
) -> Vec<SessionUpdate> {
    let turn = c.prompt(session, script).await.unwrap();
    assert_eq!(turn.stop_reason, StopReason::EndTurn, "{script}");
    turn.updates
}

fn titles_sent(updates: &[SessionUpdate]) -> Vec<Value> {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::SessionInfoUpdate(info) => {
                Some(serde_json::to_value(info).unwrap()["title"].clone())
            }
            _ => None,
        })
        .collect()
}

/// The session's record files in `state`.
fn record_files(state: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(state.join("sessions")) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

#[tokio::test]
async fn list_is_newest_first_with_titles_filtered_by_cwd_and_paged() {
    let (_tmp, dir) = temp_dir();
    let (a, b, many) = (dir.join("a"), dir.join("b"), dir.join("many"));
    for d in [&a, &b, &many] {
        std::fs::create_dir(d).unwrap();
    }
    let state = dir.join("state");
    with_agent(ClientProfile::Plain, &state, "list", async |mut c| {
        let first = c.new_session(&a).await?;
        let second = c.new_session(&b).await?;
        // The first command gives the title: the description when there is one.
        let updates = ok(&mut c, &first, "# Build the thing\ntrue").await;
        assert_eq!(titles_sent(&updates), [Value::from("Build the thing")]);
        assert!(
            titles_sent(&ok(&mut c, &first, "true").await).is_empty(),
            "only the first"
        );
        let updates = ok(&mut c, &second, "echo one\necho two").await;
        assert_eq!(titles_sent(&updates), [Value::from("echo one")]);

        let all = list(&c, None, None).await?;
        assert_eq!(
            listed_ids(&all),
            [second.0.to_string(), first.0.to_string()]
        );
        assert_eq!(all.next_cursor, None);
        let newest = &all.sessions[0];
        assert_eq!(newest.cwd, b);
        assert_eq!(newest.title.as_deref(), Some("echo one"));
        let updated = newest.updated_at.as_deref().expect("updatedAt");
        assert!(
            regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
                .unwrap()
                .is_match(updated),
            "{updated}"
        );
        let only_a = list(&c, Some(&a), None).await?;
        assert_eq!(listed_ids(&only_a), [first.0.to_string()]);
        assert_eq!(only_a.sessions[0].title.as_deref(), Some("Build the thing"));

        // 51 sessions in one directory: two pages, every session once.
        let mut made = Vec::new();
        for _ in 0..51 {
            made.push(c.new_session(&many).await?.0.to_string());
        }
        let page1 = list(&c, Some(&many), None).await?;
        assert_eq!(page1.sessions.len(), 50);
        let cursor = page1.next_cursor.clone().expect("a second page");
        let page2 = list(&c, Some(&many), Some(cursor)).await?;
        assert_eq!(page2.next_cursor, None);
        let mut seen = [listed_ids(&page1), listed_ids(&page2)].concat();
        seen.sort();
        made.sort();
        assert_eq!(seen, made);
        let bad = list(&c, None, Some("not a cursor".into()))
            .await
            .unwrap_err();
        assert_eq!(bad.code, ErrorCode::INVALID_PARAMS);
        Ok(())
    })
    .await;
    // The store is private: the directory 0700, the records 0600.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&state.join("sessions")), 0o700);
    let files = record_files(&state);
    assert_eq!(files.len(), 53);
    assert!(files.iter().all(|f| mode(f) == 0o600));
}

/// Agent 1 makes a session (a `cd`, a failing command with a description) and exits; agent 2
/// loads it. Returns agent 2's replay, its transcript, and what `pwd` printed after the load.
async fn made_then_loaded(
    profile: ClientProfile,
    dir: &Path,
) -> (Vec<SessionUpdate>, Transcript, Vec<SessionUpdate>) {
    let state = dir.join(".state");
    std::fs::create_dir(dir.join("sub")).unwrap();
    let (session, _) = with_agent(profile, &state, "make", async |mut c| {
        let session = c.new_session(dir).await?;
        ok(&mut c, &session, "cd sub").await;
        let turn = c
            .prompt(&session, "# Greet, then fail\nprintf 'hi\\n'; exit 3")
            .await?;
        assert_eq!(turn.stop_reason, StopReason::EndTurn);
        Ok(session)
    })
    .await;
    let ((replayed, after), transcript) = with_agent(profile, &state, "load", async |mut c| {
        let (response, replayed) = c.load_session(&session, dir).await?;
        let modes = response.modes.expect("modes");
        assert_eq!(&*modes.current_mode_id.0, "full");
        let after = ok(&mut c, &session, "pwd").await;
        Ok((replayed, after))
    })
    .await;
    (replayed, transcript, after)
}

/// The transcript with the session id (its format is the agent's business) and the temp dir
/// replaced.
pub(super) fn normalized(transcript: &Transcript, dir: &Path, session: &str) -> String {
    let lines: Vec<String> = transcript
        .lines()
        .iter()
        .map(|l| l.replace(&format!("\"{session}\""), "\"[SESSION]\""))
        .collect();
    normalize_transcript(&lines, dir).join("\n")
}

pub(super) fn session_of(transcript: &Transcript) -> String {
    let line = transcript
        .lines()
        .into_iter()
        .find(|l| l.contains("\"session/load\""))
        .expect("a session/load");
    let value: Value = serde_json::from_str(&line[3..]).unwrap();
    value["params"]["sessionId"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn load_by_another_process_replays_cards_and_restores_the_directory() {
    let (_tmp, dir) = temp_dir();
    let (replayed, transcript, after) = made_then_loaded(ClientProfile::Zed, &dir).await;
    // Per call: the prompt, the tool call, the output (card), the final update.
    let prompts: Vec<String> = replayed
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::UserMessageChunk(chunk) => Some(
                serde_json::to_value(&chunk.content).unwrap()["text"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            ),
            _ => None,
        })
        .collect();
    assert_eq!(
        prompts,
        ["cd sub", "# Greet, then fail\nprintf 'hi\\n'; exit 3"]
    );
    let zed = zed_replay(&replayed);
    assert_eq!(zed.problems(), &[] as &[String]);
    let session = session_of(&transcript);
    let calls: Vec<String> = replayed
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCall(call) => Some(call.tool_call_id.0.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    let cd = zed.card(&calls[0]).expect("the cd card");
    assert!(
        cd.exited && cd.output.is_empty() && cd.exit_code == Some(0),
        "{cd:?}"
    );
    let card = zed.card(&calls[1]).expect("the second card");
    assert_eq!(card.output, "hi\n");
    assert_eq!(card.exit_code, Some(3));
    assert_eq!(card.status, "failed");
    assert_eq!(card.cwd.as_deref(), Some(dir.join("sub").to_str().unwrap()));
    assert!(
        card.texts.contains(&"Greet, then fail".to_string()),
        "{card:?}"
    );
    // The directory the `cd` left is restored, and the new call's id is not a replayed one.
    assert_eq!(card_output(&after), format!("{}/sub\n", dir.display()));
    assert!(!calls.contains(&tool_call(&after).tool_call_id.0.to_string()));
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("sessions__zed_load", normalized(&transcript, &dir, &session));
    });
}

#[tokio::test]
async fn load_by_another_process_replays_console_blocks_for_plain_clients() {
    let (_tmp, dir) = temp_dir();
    let (replayed, transcript, after) = made_then_loaded(ClientProfile::Plain, &dir).await;
    let finals: Vec<String> = replayed
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCallUpdate(update) => {
                update.fields.content.as_deref().map(|c| texts(c).join("|"))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        finals,
        [
            "```console\n[exit code: 0]\n```".to_string(),
            "Greet, then fail|```console\nhi\n[exit code: 3]\n```".to_string()
        ]
    );
    assert!(replayed
        .iter()
        .all(|u| !matches!(u, SessionUpdate::ToolCallUpdate(x) if x.meta.is_some())));
    assert_eq!(
        console_block(&after),
        format!("```console\n{}/sub\n[exit code: 0]\n```", dir.display())
    );
    let session = session_of(&transcript);
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("sessions__plain_load", normalized(&transcript, &dir, &session));
    });
}

#[tokio::test]
async fn resume_restores_directory_and_mode_without_replay() {
    let (_tmp, dir) = temp_dir();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let state = dir.join(".state");
    let (session, _) = with_agent(ClientProfile::Plain, &state, "make", async |mut c| {
        let session = c.new_session(&dir).await?;
        c.connection()
            .send_request(SetSessionModeRequest::new(
                session.clone(),
                "read-only".to_string(),
            ))
            .block_task()
            .await?;
        ok(&mut c, &session, "cd sub").await;
        Ok(session)
    })
    .await;
    let (_, transcript) = with_agent(ClientProfile::Plain, &state, "resume", async |mut c| {
        let response = c
            .connection()
            .send_request(ResumeSessionRequest::new(session.clone(), &dir))
            .block_task()
            .await?;
        assert_eq!(
            &*response.modes.expect("modes").current_mode_id.0,
            "read-only"
        );
        let after = ok(&mut c, &session, "pwd").await;
        assert!(console_block(&after).contains(&format!("{}/sub\n", dir.display())));
        Ok(())
    })
    .await;
    // Nothing is replayed: besides the commands' advertisement, the first session/update is
    // the new prompt's.
    let lines = transcript.lines();
    let resumed = lines
        .iter()
        .position(|l| l.contains("\"session/resume\""))
        .unwrap();
    let prompt = lines
        .iter()
        .position(|l| l.contains("\"session/prompt\""))
        .unwrap();
    assert!(
        !lines[resumed..prompt]
            .iter()
            .any(|l| l.contains("session/update") && !l.contains("available_commands_update")),
        "{:#?}",
        &lines[resumed..prompt]
    );
}

#[tokio::test]
async fn close_kills_the_running_command_and_keeps_the_record() {
    let (_tmp, dir) = temp_dir();
    let state = dir.join(".state");
    let name = process_name(&dir);
    with_agent(ClientProfile::Plain, &state, "close", async |mut c| {
        let session = c.new_session(&dir).await?;
        let running = c
            .start_prompt(&session, &format!("exec -a {name} sleep 60"))
            .block_task();
        wait_for_process(&name).await;
        c.connection()
            .send_request(CloseSessionRequest::new(session.clone()))
            .block_task()
            .await?;
        // Answered once the command is gone.
        assert!(processes_named(&name).is_empty());
        assert_eq!(running.await?.stop_reason, StopReason::Cancelled);
        let refused = c.prompt(&session, "true").await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::RESOURCE_NOT_FOUND);
        assert!(
            refused.message.contains("session/load or session/resume"),
            "{refused:?}"
        );
        // The record stays: listed, and loading it makes the session usable again.
        assert_eq!(
            listed_ids(&list(&c, None, None).await?),
            [session.0.to_string()]
        );
        let (_, replayed) = c.load_session(&session, &dir).await?;
        let killed = final_update(&replayed);
        assert_eq!(status(killed), "failed");
        ok(&mut c, &session, "true").await;
        Ok(())
    })
    .await;
}

/// `session/close` writes the record whole: the journal is gone when it is answered, and the
/// record file alone (as an agent that reads no journal sees it) holds every change the journal
/// had: the calls and their ends, the turns, the directory a `cd` left, the exported variable.
#[tokio::test]
async fn close_folds_the_journal_into_the_record() {
    let (_tmp, dir) = temp_dir();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let state = dir.join(".state");
    with_agent(
        ClientProfile::Plain,
        &state,
        "close-whole",
        async |mut c| {
            let session = c.new_session(&dir).await?;
            ok(&mut c, &session, "echo first").await;
            ok(
                &mut c,
                &session,
                "export CLOSED_WITH=journal; cd sub; echo second",
            )
            .await;
            let sessions = state.join("sessions");
            let (record, journal) = (
                sessions.join(format!("{}.json", session.0)),
                sessions.join(format!("{}.journal", session.0)),
            );
            assert!(journal.exists(), "the calls went to the journal");
            let store = acp_bash::store::Store::new(&state);
            let before_close = store.load(&session.0).unwrap();
            c.connection()
                .send_request(CloseSessionRequest::new(session.clone()))
                .block_task()
                .await?;
            assert_eq!(
                record_files(&state),
                std::slice::from_ref(&record),
                "no journal after close"
            );
            let alone: acp_bash::store::SessionRecord =
                serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
            let commands: Vec<_> = alone
                .history
                .iter()
                .map(|call| call.command.as_str())
                .collect();
            assert_eq!(
                commands,
                [
                    "echo first",
                    "export CLOSED_WITH=journal; cd sub; echo second"
                ]
            );
            assert!(
                alone.history.iter().all(|call| call.end.is_some()),
                "{alone:?}"
            );
            assert_eq!(alone.turns.len(), 2);
            assert_eq!(alone.cwd, dir.join("sub"));
            assert!(
                alone.shell.vars.iter().any(|var| var.name == "CLOSED_WITH"),
                "{alone:?}"
            );
            // Everything the journal held is in it (only the journal's token is new).
            let mut expected = before_close;
            expected.journal = alone.journal.clone();
            assert_eq!(alone, expected);
            Ok(())
        },
    )
    .await;
}

#[tokio::test]
async fn close_kills_the_sessions_background_jobs() {
    let (_tmp, dir) = temp_dir();
    let state = dir.join(".state");
    let name = process_name(&dir);
    with_agent(ClientProfile::Plain, &state, "close-job", async |mut c| {
        let session = c.new_session(&dir).await?;
        let started = c
            .prompt(&session, &format!("/bg exec -a {name} sleep 60"))
            .await?;
        assert_eq!(started.stop_reason, StopReason::EndTurn);
        wait_for_process(&name).await;
        c.connection()
            .send_request(CloseSessionRequest::new(session.clone()))
            .block_task()
            .await?;
        // Answered once the session's jobs are gone, and their ends recorded: loaded again,
        // the job replays as killed by the close, not as ended with the agent.
        assert!(processes_named(&name).is_empty());
        let (_, replayed) = c.load_session(&session, &dir).await?;
        let killed = final_update(&replayed);
        assert_eq!(status(killed), "failed");
        let text = texts(killed.fields.content.as_deref().unwrap()).join("\n");
        assert!(
            text.contains("[cancelled]") && !text.contains("ended with the agent"),
            "{text}"
        );
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn delete_removes_the_record() {
    let (_tmp, dir) = temp_dir();
    let state = dir.join(".state");
    let (session, _) = with_agent(ClientProfile::Plain, &state, "make", async |mut c| {
        let session = c.new_session(&dir).await?;
        ok(&mut c, &session, "true").await;
        Ok(session)
    })
    .await;
    assert_eq!(record_files(&state).len(), 1);
    with_agent(ClientProfile::Plain, &state, "delete", async |mut c| {
        c.connection()
            .send_request(DeleteSessionRequest::new(session.clone()))
            .block_task()
            .await?;
        assert!(list(&c, None, None).await?.sessions.is_empty());
        let error = c.load_session(&session, &dir).await.unwrap_err();
        assert_eq!(error.code, ErrorCode::RESOURCE_NOT_FOUND);
        let again = c
            .connection()
            .send_request(DeleteSessionRequest::new(session.clone()))
            .block_task()
            .await
            .unwrap_err();
        assert_eq!(again.code, ErrorCode::RESOURCE_NOT_FOUND);
        Ok(())
    })
    .await;
    assert_eq!(record_files(&state), Vec::<PathBuf>::new());
}

#[tokio::test]
async fn hostile_session_ids_never_reach_outside_the_store() {
    let (_tmp, dir) = temp_dir();
    let state = dir.join(".state");
    // What `<state>/sessions/../../victim.json` would name.
    let victim = dir.join("victim.json");
    std::fs::write(&victim, "keep me").unwrap();
    with_agent(
        ClientProfile::Plain,
        &state,
        "hostile ids",
        async |mut c| {
            c.new_session(&dir).await?;
            for id in ["../../victim", "/etc/passwd", ".hidden", "a/b", ""] {
                let session = SessionId::new(id);
                let deleted = c
                    .connection()
                    .send_request(DeleteSessionRequest::new(session.clone()))
                    .block_task()
                    .await
                    .unwrap_err();
                assert_eq!(deleted.code, ErrorCode::RESOURCE_NOT_FOUND, "{id:?}");
                let loaded = c.load_session(&session, &dir).await.unwrap_err();
                assert_eq!(loaded.code, ErrorCode::RESOURCE_NOT_FOUND, "{id:?}");
            }
            Ok(())
        },
    )
    .await;
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert_eq!(record_files(&state).len(), 1);
}

#[tokio::test]
async fn a_command_running_when_its_agent_ended_is_replayed_as_ended_not_restarted() {
    let (_tmp, dir) = temp_dir();
    let state = dir.join(".state");
    let name = process_name(&dir);
    let client = client_with_store(ClientProfile::Zed, &state);
    let transcript = client.transcript();
    let made = client.run(async |mut c| {
        let session = c.new_session(&dir).await?;
        // Not cancelled by the client: the agent ends (stdin closes) while the command runs.
        c.start_prompt(&session, &format!("exec -a {name} sleep 60"))
            .detach();
        wait_for_process(&name).await;
        Ok(session)
    });
    let session = guard("make", made).await.unwrap();
    // Every line is valid; the prompt is the one request the agent never answered (it ended).
    let mut validator = WireValidator::default();
    for line in transcript.lines() {
        let direction = match &line[..3] {
            "-> " => Direction::ClientToAgent,
            _ => Direction::AgentToClient,
        };
        validator.check(direction, &line[3..]).unwrap();
    }
    let unanswered = validator.unanswered();
    assert!(
        unanswered.len() <= 1 && unanswered.iter().all(|u| u.2 == "session/prompt"),
        "{unanswered:?}"
    );
    assert!(
        wait_until_no_process(&name).await,
        "the agent killed its command"
    );
    with_agent(ClientProfile::Zed, &state, "load", async |mut c| {
        let (_, replayed) = c.load_session(&session, &dir).await?;
        let ended = final_update(&replayed);
        assert_eq!(status(ended), "failed");
        let text = texts(ended.fields.content.as_deref().unwrap()).join("\n");
        assert!(
            text.contains("ended with the agent") && text.contains("not restarted"),
            "{text}"
        );
        assert!(processes_named(&name).is_empty(), "not restarted");
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn no_history_keeps_nothing_and_offers_only_close() {
    let (_tmp, dir) = temp_dir();
    let state = dir.join(".xdg");
    let client = AcpClient::new(binary(), ["serve", "--sandbox", "full", "--no-history"])
        .env("XDG_STATE_HOME", state.to_str().unwrap())
        .profile(ClientProfile::Plain);
    run_client(client, "no history", async |mut c| {
        let caps = serde_json::to_value(&c.init.agent_capabilities).unwrap();
        assert_eq!(caps["loadSession"], false);
        assert_eq!(
            caps["sessionCapabilities"],
            serde_json::json!({"close": {}})
        );
        let session = c.new_session(&dir).await?;
        ok(&mut c, &session, "true").await;
        // A job, to its end: neither its start nor its end is written anywhere.
        let started = ok(&mut c, &session, "/bg echo job").await;
        let job = tool_call(&started).tool_call_id.clone();
        let ends = |update: &SessionUpdate| {
            matches!(update, SessionUpdate::ToolCallUpdate(u)
                if u.tool_call_id == job && u.fields.status.is_some())
        };
        // The job's end may come before the turn's answer, or after it.
        if !started.iter().any(ends) {
            while !c.next_update().await.is_some_and(|n| ends(&n.update)) {}
        }
        let error = list(&c, None, None).await.unwrap_err();
        assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND);
        c.connection()
            .send_request(CloseSessionRequest::new(session.clone()))
            .block_task()
            .await?;
        assert!(c.prompt(&session, "true").await.is_err());
        Ok(())
    })
    .await;
    assert!(!state.exists(), "nothing on disk");
}

#[tokio::test]
async fn two_agents_on_one_session_never_tear_its_record() {
    let (_tmp, dir) = temp_dir();
    let state = dir.join(".state");
    let (session, _) = with_agent(ClientProfile::Plain, &state, "make", async |mut c| {
        c.new_session(&dir).await
    })
    .await;
    let record = state.join("sessions").join(format!("{}.json", session.0));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A reader that parses the record for as long as both agents write it.
    let reader = {
        let (record, stop) = (record.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let bytes = std::fs::read(&record).expect("the record is always there");
                serde_json::from_slice::<Value>(&bytes).expect("never a torn record");
                reads += 1;
            }
            reads
        })
    };
    let agent = |n: usize| {
        let (state, dir, session) = (state.clone(), dir.clone(), session.clone());
        async move {
            with_agent(ClientProfile::Plain, &state, "writer", async |mut c| {
                c.connection()
                    .send_request(ResumeSessionRequest::new(session.clone(), &dir))
                    .block_task()
                    .await?;
                for i in 0..15 {
                    ok(
                        &mut c,
                        &session,
                        &format!("echo agent {n} call {i}; seq 1 300"),
                    )
                    .await;
                }
                Ok(())
            })
            .await
        }
    };
    tokio::join!(agent(1), agent(2));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let value: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert!(value["history"].as_array().is_some_and(|h| !h.is_empty()));
    // No temporary file is left behind.
    assert_eq!(record_files(&state), [record]);
}

#[tokio::test]
async fn load_and_resume_in_other_processes_restore_exported_variables_and_cd_minus() {
    const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ0123";
    let (_tmp, dir) = temp_dir();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let state = dir.join(".state");
    // The agent has a secret and an editor's OLDPWD in its environment.
    let agent = || {
        client_with_store(ClientProfile::Plain, &state)
            .env("GITHUB_TOKEN", TOKEN)
            .env("OLDPWD", "/")
    };
    let (session, _) = converse_with(agent(), "make", async |mut c| {
        let session = c.new_session(&dir).await?;
        let first = ok(&mut c, &session, "echo \"[${OLDPWD-}]\"").await;
        assert!(console_block(&first).contains("[]\n"), "{first:?}");
        ok(
            &mut c,
            &session,
            &format!("export GREETING=$'hello\\nworld' LEAK={TOKEN}; unset LANG; cd sub; cd .."),
        )
        .await;
        Ok(session)
    })
    .await;
    let record =
        std::fs::read_to_string(state.join("sessions").join(format!("{}.json", session.0)))
            .unwrap();
    // The prompt's own text is history; the shell state holds no trace of the secret.
    let shell = serde_json::from_str::<Value>(&record).unwrap()["shell"].to_string();
    assert!(
        shell.contains("\"GREETING\"") && !shell.contains(TOKEN),
        "{shell}"
    );
    let probe =
        "printf '%s|' \"$GREETING\" \"${LEAK-unset}\" \"${LANG-unset}\"; cd - >/dev/null; pwd";
    let expected = format!("hello\nworld|unset|unset|{}/sub\n", dir.display());
    converse_with(agent(), "load", async |mut c| {
        c.load_session(&session, &dir).await?;
        let after = ok(&mut c, &session, probe).await;
        assert_eq!(
            console_block(&after),
            format!("```console\n{expected}[exit code: 0]\n```")
        );
        Ok(())
    })
    .await;
    // The load's `cd -` moved the session to sub (and its previous directory to the root).
    converse_with(agent(), "resume", async |mut c| {
        c.connection()
            .send_request(ResumeSessionRequest::new(session.clone(), &dir))
            .block_task()
            .await?;
        let after = ok(&mut c, &session, "echo \"$GREETING\"; cd - >/dev/null; pwd").await;
        assert_eq!(
            console_block(&after),
            format!(
                "```console\nhello\nworld\n{}\n[exit code: 0]\n```",
                dir.display()
            )
        );
        Ok(())
    })
    .await;
}
