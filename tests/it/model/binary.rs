//! The model driver through the BUILT BINARY as an editor starts it (`acp-bash serve --model
//! …` over pipes), against the fake provider on loopback: snapshot transcripts of a model turn
//! for a card client and a plain client, the key kept from commands (through the model's own
//! `env`) and from stderr, the auth-required error without a key, and no model without
//! `--model`.

use acp_bash::acp::client::{AcpClient, ClientProfile};
use agent_client_protocol::v1::schema::{SessionUpdate, StopReason};

use super::harness::KEY;
use crate::support::acp::*;
use crate::support::fake_model::{anthropic, openai, FakeModel};

/// The binary serving with `--model` at the fake, plus `extra` flags.
fn model_client(profile: ClientProfile, model: &str, base: &str, extra: &[&str]) -> AcpClient {
    let mut args = vec![
        "serve",
        "--sandbox",
        "full",
        "--no-history",
        "--log-level",
        "acp_bash=debug",
        "--model",
        model,
        "--base-url",
        base,
    ];
    args.extend_from_slice(extra);
    // No key file of the machine's user is ever read.
    AcpClient::new(binary(), args)
        .profile(profile)
        .env("XDG_CONFIG_HOME", "/nonexistent/acp-bash-tests")
}

async fn model_turn_transcript(profile: ClientProfile, name: &str) {
    let fake = FakeModel::start(vec![
        openai::reply(
            &["I will ", "list it."],
            &[(
                "call_1",
                "bash",
                &[
                    "{\"command\": \"mkdir -p d && cd d",
                    " && echo hello\", \"description\": \"Say hello\"}",
                ],
            )],
        ),
        openai::reply(&["It printed ", "`hello`."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let base = format!("{}/v1", fake.base);
    let client = model_client(profile, "openai:fake-model", &base, &[]).env("OPENAI_API_KEY", KEY);
    let (turn, transcript) = converse_with(client, name, async |mut c| {
        let session = c.new_session(&dir).await?;
        c.prompt(&session, "say hello").await
    })
    .await;
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    let text: String = turn
        .updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                agent_client_protocol::v1::schema::ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(text, "I will list it.It printed `hello`.");
    // The model's call ran in the session's directory, through the same card or block.
    if profile == ClientProfile::Zed {
        assert_eq!(card_output(&turn.updates), "hello\n");
    } else {
        assert!(
            console_block(&turn.updates).contains("hello"),
            "{}",
            console_block(&turn.updates)
        );
    }
    let second = &fake.requests()[1].body["messages"];
    assert_eq!(second[3]["tool_call_id"], "call_1");
    assert_eq!(second[3]["content"], "hello\n[exit code: 0]");
    let stderr = transcript.stderr().join("\n");
    assert!(!stderr.contains(KEY), "the key is in stderr:\n{stderr}");
    assert!(!transcript.lines().join("\n").contains(KEY));
    let normalized = normalize_transcript(&transcript.lines(), &dir);
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(name, normalized.join("\n"));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zed_model_turn() {
    model_turn_transcript(ClientProfile::Zed, "zed__model_turn").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_model_turn() {
    model_turn_transcript(ClientProfile::Plain, "plain__model_turn").await;
}

/// A key in a variable whose name and value look like nothing secret: `--api-key-env` still
/// keeps it from every command. The model runs `env`; what went back to it has no key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_never_reaches_the_models_own_env() {
    let plain_key = "zq-unremarkable-value-7781";
    let fake = FakeModel::start(vec![
        anthropic::reply(
            &[],
            &[(
                "toolu_1",
                "bash",
                &["{\"command\": \"env; echo env-done\"}"],
            )],
        ),
        anthropic::reply(&["Done."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let client = model_client(
        ClientProfile::Zed,
        "anthropic:fake",
        &fake.base,
        &["--api-key-env", "MODEL_ACCESS"],
    )
    .env("MODEL_ACCESS", plain_key)
    .env("ACPBASH_HARMLESS", "visible");
    let (turn, transcript) = converse_with(client, "env through the model", async |mut c| {
        let session = c.new_session(&dir).await?;
        c.prompt(&session, "show env").await
    })
    .await;
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    let requests = fake.requests();
    assert_eq!(requests[0].header("x-api-key"), Some(plain_key));
    let result = requests[1].body["messages"][2]["content"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        result.contains("ACPBASH_HARMLESS=visible") && result.contains("env-done"),
        "{result}"
    );
    assert!(!result.contains(plain_key), "{result}");
    assert!(!result.contains("MODEL_ACCESS"), "{result}");
    let everything = [transcript.lines(), transcript.stderr()]
        .concat()
        .join("\n");
    assert!(!everything.contains(plain_key), "the key left the agent");
}

/// `--model` without a key: `initialize` advertises how to authenticate, and a prompt gets
/// `auth_required` naming the variable, without any model request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_the_prompt_is_auth_required_naming_the_variable() {
    let fake = FakeModel::start(vec![]).await;
    let (_tmp, dir) = temp_dir();
    let client = model_client(
        ClientProfile::Zed,
        "openai:fake",
        &format!("{}/v1", fake.base),
        &["--api-key-env", "ACPBASH_TEST_NO_SUCH_KEY"],
    );
    let ((methods, error, bang), _) = converse_with(client, "no key", async |mut c| {
        let methods = serde_json::to_value(&c.init.auth_methods).expect("serializable");
        let session = c.new_session(&dir).await?;
        let error = c.prompt(&session, "hello").await.unwrap_err();
        let bang = c.prompt(&session, "!echo still-works").await?;
        Ok((methods, error, bang))
    })
    .await;
    assert!(
        methods.to_string().contains("ACPBASH_TEST_NO_SUCH_KEY"),
        "{methods}"
    );
    assert_eq!(error.code, agent_client_protocol::ErrorCode::AUTH_REQUIRED);
    assert!(
        format!("{:?}", error.data).contains("ACPBASH_TEST_NO_SUCH_KEY"),
        "{error:?}"
    );
    assert_eq!(bang.stop_reason, StopReason::EndTurn);
    assert_eq!(card_output(&bang.updates), "still-works\n");
    assert!(fake.requests().is_empty());
}

/// `session/cancel` through the binary stops the model's stream at once and answers
/// `cancelled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_through_the_binary_stops_the_stream() {
    let mut events = openai::events(&[], &["Streaming"], &[]);
    events.truncate(2);
    let fake = FakeModel::start(vec![crate::support::fake_model::Answer::Hang(events)]).await;
    let (_tmp, dir) = temp_dir();
    let client = model_client(
        ClientProfile::Zed,
        "openai:fake",
        &format!("{}/v1", fake.base),
        &[],
    )
    .env("OPENAI_API_KEY", KEY);
    let (stop, _) = converse_with(client, "cancel a model turn", async |mut c| {
        let session = c.new_session(&dir).await?;
        let response = c.start_prompt(&session, "go").block_task();
        // Wait for the model's text, then cancel.
        loop {
            let update = c.next_update().await.expect("an update");
            if matches!(update.update, SessionUpdate::AgentMessageChunk(_)) {
                break;
            }
        }
        c.cancel(&session)?;
        fake.client_left().await;
        Ok(response.await?.stop_reason)
    })
    .await;
    assert_eq!(stop, StopReason::Cancelled);
}

/// The session store keeps the turn (the prompt, the call) but never the key, and neither do
/// the logs at `--log-level trace`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_store_never_holds_the_key() {
    let fake = FakeModel::start(vec![
        openai::reply(&[], &[("c1", "bash", &["{\"command\": \"echo stored\"}"])]),
        openai::reply(&["Kept."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let state = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", fake.base);
    let client = AcpClient::new(
        binary(),
        [
            "serve",
            "--sandbox",
            "full",
            "--state-dir",
            state.path().to_str().unwrap(),
            "--model",
            "openai:fake",
            "--base-url",
            &base,
            "--log-level",
            "trace",
        ],
    )
    .profile(ClientProfile::Zed)
    .env("OPENAI_API_KEY", KEY);
    let (turn, transcript) = converse_with(client, "a stored model turn", async |mut c| {
        let session = c.new_session(&dir).await?;
        c.prompt(&session, "store this").await
    })
    .await;
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    let mut stored = String::new();
    let mut dirs = vec![state.path().to_path_buf()];
    while let Some(next) = dirs.pop() {
        for entry in std::fs::read_dir(next).unwrap().flatten() {
            if entry.path().is_dir() {
                dirs.push(entry.path());
            } else {
                stored.push_str(&String::from_utf8_lossy(
                    &std::fs::read(entry.path()).unwrap(),
                ));
            }
        }
    }
    assert!(
        stored.contains("echo stored"),
        "the turn was not stored: {stored}"
    );
    assert!(!stored.contains(KEY), "the key is in the store");
    // Not in the logs either, at the most verbose level of every crate.
    let stderr = transcript.stderr().join("\n");
    assert!(!stderr.contains(KEY), "the key is in stderr");
}

/// `session/load` in another agent process: the next prompt sends the earlier conversation
/// (the prompt, the call, its result, the model's text) to the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_load_in_another_process_the_model_sees_the_earlier_turns() {
    let (_tmp, dir) = temp_dir();
    let state = tempfile::tempdir().unwrap();
    let serve = |base: String| {
        AcpClient::new(
            binary(),
            [
                "serve".to_string(),
                "--sandbox".into(),
                "full".into(),
                "--state-dir".into(),
                state.path().to_str().unwrap().into(),
                "--model".into(),
                "anthropic:fake".into(),
                "--base-url".into(),
                base,
            ],
        )
        .profile(ClientProfile::Zed)
        .env("ANTHROPIC_API_KEY", KEY)
    };
    let first = FakeModel::start(vec![
        anthropic::reply(
            &[],
            &[("toolu_1", "bash", &["{\"command\": \"echo remembered\"}"])],
        ),
        anthropic::reply(&["Noted."], &[]),
    ])
    .await;
    let (session, _) = converse_with(
        serve(first.base.clone()),
        "the first process",
        async |mut c| {
            let session = c.new_session(&dir).await?;
            c.prompt(&session, "remember this").await?;
            Ok(session)
        },
    )
    .await;
    let second = FakeModel::start(vec![anthropic::reply(&["You ran echo."], &[])]).await;
    let (turn, _) = converse_with(
        serve(second.base.clone()),
        "the second process",
        async |mut c| {
            c.load_session(&session, &dir).await?;
            c.prompt(&session, "what did I ask?").await
        },
    )
    .await;
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    let messages = second.requests()[0].body["messages"].clone();
    assert_eq!(messages[0]["content"][0]["text"], "remember this");
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(
        messages[1]["content"][0]["input"]["command"],
        "echo remembered"
    );
    assert_eq!(
        messages[2]["content"][0]["content"],
        "remembered\n[exit code: 0]"
    );
    // The model's own text of that turn is sent too, then the new prompt.
    assert_eq!(messages[3]["role"], "assistant");
    assert_eq!(messages[3]["content"][0]["text"], "Noted.");
    assert_eq!(messages[4]["content"][0]["text"], "what did I ask?");
    assert_eq!(messages.as_array().unwrap().len(), 5);
}

/// `OPENAI_BASE_URL` is honoured without `--base-url`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_base_url_from_the_environment_is_honoured() {
    let fake = FakeModel::start(vec![openai::reply(&["From the env."], &[])]).await;
    let (_tmp, dir) = temp_dir();
    let client = AcpClient::new(
        binary(),
        [
            "serve",
            "--sandbox",
            "full",
            "--no-history",
            "--model",
            "openai:fake",
        ],
    )
    .profile(ClientProfile::Plain)
    .env("OPENAI_BASE_URL", format!("{}/v1", fake.base))
    .env("OPENAI_API_KEY", KEY);
    let (turn, _) = converse_with(client, "OPENAI_BASE_URL", async |mut c| {
        let session = c.new_session(&dir).await?;
        c.prompt(&session, "hi").await
    })
    .await;
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    assert_eq!(fake.requests()[0].path, "/v1/chat/completions");
}

/// The model flags work as `zed-config` arguments; the model's other flags need `--model`.
#[test]
fn zed_config_repeats_the_model_flags() {
    let output = std::process::Command::new(binary())
        .args([
            "--model",
            "anthropic:claude-x",
            "--base-url",
            "http://127.0.0.1:9",
        ])
        .args(["--api-key-env", "MY_KEY", "--max-steps", "7", "zed-config"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let snippet: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let args = snippet["agent_servers"]["acp-bash"]["args"].to_string();
    assert!(
        args.ends_with(r#""--model","anthropic:claude-x","--base-url","http://127.0.0.1:9","--api-key-env","MY_KEY","--max-steps","7"]"#),
        "{args}"
    );
    let orphan = std::process::Command::new(binary())
        .args(["--max-steps", "7", "zed-config"])
        .output()
        .unwrap();
    assert!(!orphan.status.success());
    let bad = std::process::Command::new(binary())
        .args(["--model", "gpt-4", "zed-config"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("openai:NAME"));
}

/// A base URL by host name (`localhost`, from /etc/hosts) reaches the provider: the agent's
/// name lookup (glibc's, linked in: the binary is a static PIE) works as a shared one would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_url_by_host_name_is_looked_up() {
    let fake = FakeModel::start(vec![openai::reply(&["By name."], &[])]).await;
    let by_name = fake.base.replace("127.0.0.1", "localhost");
    assert_ne!(by_name, fake.base, "the fake's base URL: {}", fake.base);
    let (_tmp, dir) = temp_dir();
    let base = format!("{by_name}/v1");
    let client =
        model_client(ClientProfile::Plain, "openai:fake", &base, &[]).env("OPENAI_API_KEY", KEY);
    let (turn, _) = converse_with(client, "base URL by name", async |mut c| {
        let session = c.new_session(&dir).await?;
        c.prompt(&session, "hi").await
    })
    .await;
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    assert_eq!(fake.requests().len(), 1);
}
