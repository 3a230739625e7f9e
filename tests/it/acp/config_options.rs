//! Config options over ACP, as a Zed-like client over real pipes with the built binary: the
//! sandbox mode (and, with `--model`, the model) in `configOptions` beside `modes` on
//! `session/new`, `load` and `resume`; `session/set_config_option` (a default sent right after
//! `session/new`, as Zed applies `default_config_options`) changes the next command or model
//! request and answers with the whole list; each way of changing the mode announces itself in
//! the other's terms; unknown ids and values are refused with the valid ones listed.

use acp_bash::acp::client::{ClientProfile, Conversation};
use agent_client_protocol::v1::schema::{
    ResumeSessionRequest, SessionConfigOption, SessionId, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    StopReason,
};
use serde_json::Value;

use crate::support::acp::*;
use crate::support::fake_model::{openai, FakeModel};

/// A workspace outside the temp dir (which every mode may write), so that read-only shows.
fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::Builder::new()
        .prefix("acp-bash-config-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    (tmp, dir)
}

/// The binary in its default sandbox mode (`workspace`), as Zed starts it.
fn zed_client() -> acp_bash::acp::client::AcpClient {
    acp_bash::acp::client::AcpClient::new(
        binary(),
        ["serve", "--no-history", "--log-level", "acp_bash=debug"],
    )
    .profile(ClientProfile::Zed)
}

async fn set_option(
    c: &Conversation,
    session: &SessionId,
    id: &str,
    value: impl Into<agent_client_protocol::v1::schema::SessionConfigOptionValue>,
) -> agent_client_protocol::Result<SetSessionConfigOptionResponse> {
    c.connection()
        .send_request(SetSessionConfigOptionRequest::new(
            session.clone(),
            id.to_string(),
            value,
        ))
        .block_task()
        .await
}

/// The options as JSON (what crossed the wire).
fn json(options: &[SessionConfigOption]) -> Value {
    serde_json::to_value(options).unwrap()
}

/// The `currentValue` of option `id` in `options` (JSON).
fn current(options: &Value, id: &str) -> String {
    options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == id)
        .unwrap_or_else(|| panic!("no option {id:?} in {options}"))["currentValue"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The values option `id` offers.
fn values(options: &Value, id: &str) -> Vec<String> {
    let option = options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == id)
        .unwrap_or_else(|| panic!("no option {id:?} in {options}"));
    option["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap().to_string())
        .collect()
}

/// Waits for the next update of `session` that `pick` accepts (other updates are skipped).
async fn next_matching<T>(
    c: &mut Conversation,
    session: &SessionId,
    mut pick: impl FnMut(&SessionUpdate) -> Option<T>,
) -> T {
    loop {
        let notification = c.next_update().await.expect("the connection is open");
        if &notification.session_id != session {
            continue;
        }
        if let Some(found) = pick(&notification.update) {
            return found;
        }
    }
}

/// The result of the response to the first request with `method` in a transcript.
fn response_to(lines: &[String], method: &str) -> Value {
    let parsed: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(&l[3..]).unwrap())
        .collect();
    let id = parsed
        .iter()
        .find(|v| v["method"] == method)
        .expect("the request")["id"]
        .clone();
    parsed
        .iter()
        .find(|v| v["id"] == id && v.get("method").is_none())
        .expect("its response")["result"]
        .clone()
}

#[tokio::test]
async fn session_new_returns_the_mode_option_beside_the_same_modes() {
    let (_tmp, dir) = temp_dir();
    let (_, transcript) = converse_with(zed_client(), "config new", async |mut c| {
        c.new_session(&dir).await
    })
    .await;
    let answer = response_to(&transcript.lines(), "session/new");
    let modes = &answer["modes"];
    let options = &answer["configOptions"];
    // The mode, and whether to ask when the sandbox refuses a command (`permit`).
    assert_eq!(options.as_array().unwrap().len(), 2, "{options}");
    assert_eq!(options[1]["id"], "permission_requests", "{options}");
    let mode = &options[0];
    assert_eq!(mode["id"], "mode");
    assert_eq!(mode["type"], "select");
    assert_eq!(mode["category"], "mode");
    assert_eq!(mode["currentValue"], modes["currentModeId"]);
    // The same choices, in the same order, with the same names and descriptions.
    let from_modes: Vec<(Value, Value, Value)> = modes["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["id"].clone(), m["name"].clone(), m["description"].clone()))
        .collect();
    let from_option: Vec<(Value, Value, Value)> = mode["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["value"].clone(),
                o["name"].clone(),
                o["description"].clone(),
            )
        })
        .collect();
    assert_eq!(from_option, from_modes);
    assert_eq!(
        values(options, "mode"),
        ["workspace", "read-only", "full"],
        "off is not offered unless the agent was started with it"
    );
}

/// Zed applies `default_config_options` by sending `set_config_option` right after
/// `session/new`: the answer carries the whole list, a `current_mode_update` follows for
/// mode-only views, and the session's next command runs read-only.
#[tokio::test]
async fn a_default_sent_right_after_new_changes_the_next_command() {
    let (_tmp, dir) = workspace();
    converse_with(zed_client(), "config default", async |mut c| {
        let session = c.new_session(&dir).await?;
        let answer = set_option(&c, &session, "mode", "read-only").await?;
        let options = json(&answer.config_options);
        assert_eq!(current(&options, "mode"), "read-only");
        assert_eq!(
            options.as_array().unwrap().len(),
            2,
            "the whole list: {options}"
        );
        let mode = next_matching(&mut c, &session, |u| match u {
            SessionUpdate::CurrentModeUpdate(update) => Some(update.current_mode_id.0.to_string()),
            _ => None,
        })
        .await;
        assert_eq!(mode, "read-only");
        let turn = c.prompt(&session, "echo two > denied").await?;
        assert_eq!(turn.stop_reason, StopReason::EndTurn);
        let exit = terminal_exit(final_update(&turn.updates)).expect("a terminal_exit");
        assert_eq!(exit["exit_code"], 1, "{exit}");
        // And back: the next command may write again.
        set_option(&c, &session, "mode", "workspace").await?;
        let turn = c.prompt(&session, "echo three > allowed").await?;
        let exit = terminal_exit(final_update(&turn.updates)).expect("a terminal_exit");
        assert_eq!(exit["exit_code"], 0, "{exit}");
        Ok(())
    })
    .await;
    assert!(!dir.join("denied").exists());
    assert!(dir.join("allowed").exists());
}

/// A change by `session/set_mode` is sent as a `config_option_update` with the whole list.
#[tokio::test]
async fn set_mode_sends_a_config_option_update() {
    let (_tmp, dir) = temp_dir();
    converse_with(zed_client(), "config update", async |mut c| {
        let session = c.new_session(&dir).await?;
        c.connection()
            .send_request(SetSessionModeRequest::new(session.clone(), "full"))
            .block_task()
            .await?;
        let options = next_matching(&mut c, &session, |u| match u {
            SessionUpdate::ConfigOptionUpdate(update) => Some(json(&update.config_options)),
            _ => None,
        })
        .await;
        assert_eq!(current(&options, "mode"), "full");
        assert_eq!(values(&options, "mode"), ["workspace", "read-only", "full"]);
        Ok(())
    })
    .await;
}

/// Unknown ids, unknown or not offered values, a boolean for a select and an unknown session
/// are refused with invalid params (-32602, the valid ones listed); nothing changes and the
/// connection keeps working.
#[tokio::test]
async fn unknown_ids_and_values_are_refused_listing_the_valid_ones() {
    let (_tmp, dir) = temp_dir();
    converse_with(zed_client(), "config refused", async |mut c| {
        let session = c.new_session(&dir).await?;
        let error = set_option(&c, &session, "colour", "red").await.unwrap_err();
        assert_eq!(i32::from(error.code), -32602, "{error:?}");
        assert!(
            error.message.contains("unknown config option \"colour\"")
                && error.message.contains("the options are mode"),
            "{error:?}"
        );
        assert_eq!(
            error.data.as_ref().unwrap()["configOptions"],
            serde_json::json!(["mode", "permission_requests"])
        );
        let error = set_option(&c, &session, "mode", "yolo").await.unwrap_err();
        assert_eq!(i32::from(error.code), -32602, "{error:?}");
        assert!(
            error.message.contains("unknown mode \"yolo\"")
                && error.message.contains("workspace, read-only, full"),
            "{error:?}"
        );
        let error = set_option(&c, &session, "mode", "off").await.unwrap_err();
        assert!(error.message.contains("--sandbox off"), "{error:?}");
        let error = set_option(&c, &session, "mode", true).await.unwrap_err();
        assert_eq!(i32::from(error.code), -32602, "{error:?}");
        assert!(error.message.contains("not a boolean"), "{error:?}");
        // The model option exists only with a model driver.
        let error = set_option(&c, &session, "model", "openai:x")
            .await
            .unwrap_err();
        assert!(
            error.message.contains("unknown config option \"model\""),
            "{error:?}"
        );
        let error = set_option(&c, &SessionId::new("nope"), "mode", "full")
            .await
            .unwrap_err();
        assert!(error.message.contains("unknown session"), "{error:?}");
        // Nothing changed: still in workspace mode, and the session still runs commands.
        let answer = set_option(&c, &session, "mode", "workspace").await?;
        assert_eq!(current(&json(&answer.config_options), "mode"), "workspace");
        let turn = c.prompt(&session, "echo still here").await?;
        assert!(card_output(&turn.updates).contains("still here"));
        Ok(())
    })
    .await;
}

/// `session/load` and `session/resume` (in a later process) return the options too, with the
/// mode the session was left in.
#[tokio::test]
async fn load_and_resume_return_the_options_with_the_sessions_mode() {
    let (_tmp, dir) = temp_dir();
    let (_state, state_dir) = temp_dir();
    let (session, _) = converse_with(
        client_with_store(ClientProfile::Zed, &state_dir),
        "config store",
        async |mut c| {
            let session = c.new_session(&dir).await?;
            set_option(&c, &session, "mode", "read-only").await?;
            c.prompt(&session, "echo kept").await?;
            Ok(session)
        },
    )
    .await;
    let (_, transcript) = converse_with(
        client_with_store(ClientProfile::Zed, &state_dir),
        "config load",
        async |mut c| c.load_session(&session, &dir).await,
    )
    .await;
    let options = &response_to(&transcript.lines(), "session/load")["configOptions"];
    assert_eq!(current(options, "mode"), "read-only");
    let (_, transcript) = converse_with(
        client_with_store(ClientProfile::Zed, &state_dir),
        "config resume",
        async |c| {
            c.connection()
                .send_request(ResumeSessionRequest::new(session.clone(), &dir))
                .block_task()
                .await
        },
    )
    .await;
    let options = &response_to(&transcript.lines(), "session/resume")["configOptions"];
    assert_eq!(current(options, "mode"), "read-only");
    assert_eq!(values(options, "mode"), ["workspace", "read-only", "full"]);
}

/// With two `--model`s: the model is a select of category `model` (the first the default);
/// the first prompt goes to the first model, and after `set_config_option` the next model
/// request names the chosen one.
#[tokio::test]
async fn the_next_model_request_goes_to_the_chosen_model() {
    let fake = FakeModel::start(vec![
        openai::reply(&["from a"], &[]),
        openai::reply(&["from b"], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let base = format!("{}/v1", fake.base);
    let client = acp_bash::acp::client::AcpClient::new(
        binary(),
        [
            "serve",
            "--sandbox",
            "full",
            "--no-history",
            "--model",
            "openai:fake-a",
            "--model",
            "openai:fake-b",
            "--base-url",
            &base,
        ],
    )
    .profile(ClientProfile::Zed)
    .env("OPENAI_API_KEY", "sk-test-config");
    let (_, transcript) = converse_with(client, "config model", async |mut c| {
        let session = c.new_session(&dir).await?;
        let turn = c.prompt(&session, "hello a").await?;
        assert_eq!(turn.stop_reason, StopReason::EndTurn);
        let answer = set_option(&c, &session, "model", "openai:fake-b").await?;
        let options = json(&answer.config_options);
        assert_eq!(current(&options, "model"), "openai:fake-b");
        assert_eq!(current(&options, "mode"), "full");
        let error = set_option(&c, &session, "model", "openai:fake-c")
            .await
            .unwrap_err();
        assert!(
            error.message.contains("unknown model \"openai:fake-c\"")
                && error.message.contains("openai:fake-a, openai:fake-b"),
            "{error:?}"
        );
        let turn = c.prompt(&session, "hello b").await?;
        assert_eq!(turn.stop_reason, StopReason::EndTurn);
        Ok(())
    })
    .await;
    let options = &response_to(&transcript.lines(), "session/new")["configOptions"];
    assert_eq!(current(options, "model"), "openai:fake-a");
    assert_eq!(values(options, "model"), ["openai:fake-a", "openai:fake-b"]);
    let model = options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .unwrap();
    assert_eq!(model["category"], "model");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].body["model"], "fake-a");
    assert_eq!(requests[1].body["model"], "fake-b");
    // The conversation carried over to the other model.
    assert!(
        requests[1].body.to_string().contains("hello a"),
        "{}",
        requests[1].body
    );
}

/// With `--model`: a `reasoning` select of category `thought_level` (`default` first); after
/// `set_config_option` to `high` the next request carries `reasoning_effort: "high"`; an
/// unknown level is refused with the valid ones.
#[tokio::test]
async fn the_reasoning_level_goes_to_the_next_model_request() {
    let fake = FakeModel::start(vec![
        openai::reply(&["plain"], &[]),
        openai::reply(&["thought"], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let base = format!("{}/v1", fake.base);
    let client = acp_bash::acp::client::AcpClient::new(
        binary(),
        [
            "serve",
            "--sandbox",
            "full",
            "--no-history",
            "--model",
            "openai:fake-r",
            "--base-url",
            &base,
        ],
    )
    .profile(ClientProfile::Zed)
    .env("OPENAI_API_KEY", "sk-test-config");
    let (_, transcript) = converse_with(client, "config reasoning", async |mut c| {
        let session = c.new_session(&dir).await?;
        c.prompt(&session, "first").await?;
        let answer = set_option(&c, &session, "reasoning", "high").await?;
        assert_eq!(current(&json(&answer.config_options), "reasoning"), "high");
        let error = set_option(&c, &session, "reasoning", "extreme")
            .await
            .unwrap_err();
        assert!(
            error
                .message
                .contains("unknown reasoning level \"extreme\"")
                && error.message.contains("default, low, medium, high"),
            "{error:?}"
        );
        c.prompt(&session, "second").await?;
        Ok(())
    })
    .await;
    let options = &response_to(&transcript.lines(), "session/new")["configOptions"];
    assert_eq!(current(options, "reasoning"), "default");
    assert_eq!(
        values(options, "reasoning"),
        ["default", "low", "medium", "high"]
    );
    let reasoning = options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "reasoning")
        .unwrap();
    assert_eq!(reasoning["category"], "thought_level");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(requests[0].body.get("reasoning_effort").is_none());
    assert_eq!(requests[1].body["reasoning_effort"], "high");
}

/// The wire of a Zed-like client that sets a default right after `session/new`, then switches
/// by `set_mode`: reviewed snapshot.
#[tokio::test]
async fn the_config_options_transcript() {
    let (_tmp, dir) = workspace();
    let (_, transcript) = converse_with(zed_client(), "config transcript", async |mut c| {
        let session = c.new_session(&dir).await?;
        set_option(&c, &session, "mode", "read-only").await?;
        next_matching(&mut c, &session, |u| {
            matches!(u, SessionUpdate::CurrentModeUpdate(_)).then_some(())
        })
        .await;
        c.connection()
            .send_request(SetSessionModeRequest::new(session.clone(), "workspace"))
            .block_task()
            .await?;
        next_matching(&mut c, &session, |u| {
            matches!(u, SessionUpdate::ConfigOptionUpdate(_)).then_some(())
        })
        .await;
        Ok(())
    })
    .await;
    let normalized = normalize_with(&transcript.lines(), &dir, false, true);
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("zed__config_options", normalized.join("\n"));
    });
}

/// An agent with a session store that offers `models` (on the fake model's `base`).
fn model_client(
    state_dir: &std::path::Path,
    base: &str,
    models: &[&str],
) -> acp_bash::acp::client::AcpClient {
    let mut args = vec![
        "serve".to_string(),
        "--sandbox".into(),
        "full".into(),
        "--state-dir".into(),
        state_dir.to_str().unwrap().into(),
        "--base-url".into(),
        base.into(),
    ];
    for model in models {
        args.extend(["--model".to_string(), model.to_string()]);
    }
    acp_bash::acp::client::AcpClient::new(binary(), args)
        .profile(ClientProfile::Zed)
        .env("OPENAI_API_KEY", "sk-test-config")
}

/// The chosen model is kept in the session's record: `session/load` and `session/resume` in
/// later processes answer with it as the `model` option's value, and their next model request
/// names it. An agent that no longer offers it says so and goes on with its own default.
#[tokio::test]
async fn load_and_resume_in_other_processes_restore_the_chosen_model() {
    let fake = FakeModel::start(vec![
        openai::reply(&["from a"], &[]),
        openai::reply(&["loaded"], &[]),
        openai::reply(&["resumed"], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let (_state, state_dir) = temp_dir();
    let base = format!("{}/v1", fake.base);
    let both = ["openai:fake-a", "openai:fake-b"];
    let (session, _) = converse_with(
        model_client(&state_dir, &base, &both),
        "model chosen",
        async |mut c| {
            let session = c.new_session(&dir).await?;
            c.prompt(&session, "hello a").await?;
            set_option(&c, &session, "model", "openai:fake-b").await?;
            Ok(session)
        },
    )
    .await;
    let (_, transcript) = converse_with(
        model_client(&state_dir, &base, &both),
        "model load",
        async |mut c| {
            c.load_session(&session, &dir).await?;
            c.prompt(&session, "after load").await
        },
    )
    .await;
    let options = &response_to(&transcript.lines(), "session/load")["configOptions"];
    assert_eq!(current(options, "model"), "openai:fake-b");
    let (_, transcript) = converse_with(
        model_client(&state_dir, &base, &both),
        "model resume",
        async |mut c| {
            c.connection()
                .send_request(ResumeSessionRequest::new(session.clone(), &dir))
                .block_task()
                .await?;
            c.prompt(&session, "after resume").await
        },
    )
    .await;
    let options = &response_to(&transcript.lines(), "session/resume")["configOptions"];
    assert_eq!(current(options, "model"), "openai:fake-b");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert_eq!(requests[0].body["model"], "fake-a");
    assert_eq!(requests[1].body["model"], "fake-b", "after load");
    assert_eq!(requests[2].body["model"], "fake-b", "after resume");
    // An agent that offers only the other model: the default, and a note that says why.
    let (updates, transcript) = converse_with(
        model_client(&state_dir, &base, &["openai:fake-a"]),
        "model gone",
        async |mut c| {
            c.connection()
                .send_request(ResumeSessionRequest::new(session.clone(), &dir))
                .block_task()
                .await?;
            Ok(updates_until_message(&mut c, &session).await)
        },
    )
    .await;
    let options = &response_to(&transcript.lines(), "session/resume")["configOptions"];
    assert_eq!(current(options, "model"), "openai:fake-a");
    assert!(
        updates.contains("\"openai:fake-b\", which this agent does not offer")
            && updates.contains("--model openai:fake-b"),
        "{updates}"
    );
}

/// The text of the first agent message of `session`.
async fn updates_until_message(c: &mut Conversation, session: &SessionId) -> String {
    next_matching(c, session, |u| match u {
        SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
            agent_client_protocol::v1::schema::ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        },
        _ => None,
    })
    .await
}

/// The reasoning level is kept in the session's record like the model: `session/load` in a
/// later process answers with it and its next request carries it. The agent's own notice of
/// a failed request is replayed to the client, and never sent to the model as its words.
#[tokio::test]
async fn load_restores_the_reasoning_level_and_never_replays_notices_to_the_model() {
    let fake = FakeModel::start(vec![
        openai::error(
            400,
            &[],
            "Invalid value for 'temperature'",
            "invalid_request_error",
        ),
        openai::reply(&["loaded"], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let (_state, state_dir) = temp_dir();
    let base = format!("{}/v1", fake.base);
    let (session, _) = converse_with(
        model_client(&state_dir, &base, &["openai:fake-a"]),
        "reasoning chosen",
        async |mut c| {
            let session = c.new_session(&dir).await?;
            set_option(&c, &session, "reasoning", "high").await?;
            c.prompt(&session, "first").await?;
            Ok(session)
        },
    )
    .await;
    let (_, transcript) = converse_with(
        model_client(&state_dir, &base, &["openai:fake-a"]),
        "reasoning load",
        async |mut c| {
            c.load_session(&session, &dir).await?;
            c.prompt(&session, "after load").await
        },
    )
    .await;
    let options = &response_to(&transcript.lines(), "session/load")["configOptions"];
    assert_eq!(current(options, "reasoning"), "high");
    // The notice was replayed to the client by the load.
    assert!(
        transcript
            .lines()
            .iter()
            .any(|line| line.contains("rejected the request")),
        "the load replays the notice"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].body["reasoning_effort"], "high");
    assert_eq!(requests[1].body["reasoning_effort"], "high", "after load");
    let messages = requests[1].body["messages"].to_string();
    assert!(messages.contains("first"), "{messages}");
    assert!(
        !messages.contains("rejected the request") && !messages.contains("temperature"),
        "the notice went to the model as its words: {messages}"
    );
}
