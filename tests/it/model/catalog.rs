//! The provider's model list through the BUILT BINARY (`serve --model …`) against the fake
//! provider on loopback, which answers GETs by path: the context window from the list in each
//! server's shape (OpenRouter, vLLM, LM Studio, llama.cpp's `/props`), `--context-window` and
//! Ollama's `num_ctx` before it, a slow list that never holds up `session/new` and is bounded
//! for the turn, and the model picker of a provider given alone, with the error that says what
//! to do when its list cannot be had.

use std::time::Instant;

use acp_bash::acp::client::{AcpClient, ClientProfile};
use agent_client_protocol::v1::schema::{
    NewSessionRequest, SessionUpdate, SetSessionConfigOptionRequest, StopReason,
};
use serde_json::{json, Value};

use crate::support::acp::*;
use crate::support::fake_model::{openai, Answer, FakeModel};

/// The binary serving `model` at `base`, plus `extra` flags, with a key.
fn served(model: &str, base: &str, extra: &[&str]) -> AcpClient {
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
    AcpClient::new(binary(), args)
        .profile(ClientProfile::Zed)
        .env("XDG_CONFIG_HOME", "/nonexistent/acp-bash-tests")
        .env("OPENAI_API_KEY", "sk-test-catalog")
}

/// A 200 with `value` as its JSON body.
fn ok(value: Value) -> Answer {
    Answer::Status(200, Vec::new(), value.to_string())
}

/// The context window the usage of one prompt reports, with `model` and `extra` flags, on a
/// fake whose GETs answer as `gets` says.
async fn window_reported(model: &str, gets: &[(&str, Answer)], extra: &[&str]) -> (u64, FakeModel) {
    let fake = FakeModel::start(vec![openai::reply(&["hi"], &[])]).await;
    for (path, answer) in gets {
        fake.on_get(path, answer.clone());
    }
    let (_tmp, dir) = temp_dir();
    let base = format!("{}/v1", fake.base);
    let (size, _) = converse_with(served(model, &base, extra), "window", async |mut c| {
        let session = c.new_session(&dir).await?;
        let turn = c.prompt(&session, "hello").await?;
        assert_eq!(turn.stop_reason, StopReason::EndTurn);
        let size = turn
            .updates
            .iter()
            .find_map(|u| match u {
                SessionUpdate::UsageUpdate(usage) => Some(usage.size),
                _ => None,
            })
            .expect("a usage_update");
        Ok(size)
    })
    .await;
    (size, fake)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_window_comes_from_the_model_list_in_each_servers_shape() {
    // OpenRouter: `context_length` (the list's own, not the top provider's).
    let openrouter = json!({"data": [
        {"id": "other", "context_length": 1_000_000},
        {"id": "fake-model", "context_length": 32768, "top_provider": {"context_length": 16384}},
    ]});
    let (size, fake) =
        window_reported("openai:fake-model", &[("/v1/models", ok(openrouter))], &[]).await;
    assert_eq!(size, 32768);
    assert_eq!(fake.gets(), ["/v1/models"], "once, and nothing more asked");
    // vLLM: `max_model_len`.
    let vllm = json!({"object": "list", "data": [
        {"id": "fake-model", "object": "model", "owned_by": "vllm", "max_model_len": 8192},
    ]});
    let (size, _) = window_reported("openai:fake-model", &[("/v1/models", ok(vllm))], &[]).await;
    assert_eq!(size, 8192);
    // llama.cpp: the context the server runs with (`/props`), not the trained one.
    let llama = json!({"object": "list", "data": [
        {"id": "fake-model", "owned_by": "llamacpp", "meta": {"n_ctx_train": 131072}},
    ]});
    let props = json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1});
    let (size, fake) = window_reported(
        "openai:fake-model",
        &[("/v1/models", ok(llama)), ("/props", ok(props))],
        &[],
    )
    .await;
    assert_eq!(size, 4096);
    assert_eq!(fake.gets(), ["/v1/models", "/props"]);
    // LM Studio: its `/v1/models` has no window; its own list has the loaded one.
    let lm_v1 = json!({"object": "list", "data": [
        {"id": "fake-model", "object": "model", "owned_by": "organization_owner"},
    ]});
    let lm_v0 = json!({"object": "list", "data": [
        {"id": "fake-model", "type": "llm", "state": "loaded",
         "max_context_length": 131072, "loaded_context_length": 16384},
    ]});
    let (size, _) = window_reported(
        "openai:fake-model",
        &[("/v1/models", ok(lm_v1)), ("/api/v0/models", ok(lm_v0))],
        &[],
    )
    .await;
    assert_eq!(size, 16384);
    // A list without the model: the default.
    let (size, _) = window_reported("openai:fake-model", &[], &[]).await;
    assert_eq!(size, 128_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_window_and_ollamas_num_ctx_come_before_the_list() {
    let list = json!({"data": [{"id": "fake-model", "context_length": 32768}]});
    let gets = [("/v1/models", ok(list))];
    let (size, fake) =
        window_reported("openai:fake-model", &gets, &["--context-window", "50000"]).await;
    assert_eq!(size, 50000);
    assert!(fake.gets().is_empty(), "no list asked: {:?}", fake.gets());
    let (size, _) = window_reported(
        "openai:fake-model",
        &gets,
        &["--extra-body", r#"{"options":{"num_ctx":16384}}"#],
    )
    .await;
    assert_eq!(size, 16384);
}

/// A list that never answers: `session/new` answers at once (well before the bound), and the
/// turn goes on with the default window once the bound has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_model_list_never_holds_up_session_new() {
    let fake = FakeModel::start(vec![openai::reply(&["hi"], &[])]).await;
    fake.on_get("/v1/models", Answer::Hang(Vec::new()));
    let (_tmp, dir) = temp_dir();
    let base = format!("{}/v1", fake.base);
    let bound = acp_bash::driver::model::catalog::FETCH_BOUND;
    let client = served("openai:fake-model", &base, &[]);
    let (size, _) = converse_with(client, "slow list", async |mut c| {
        let started = Instant::now();
        let session = c.new_session(&dir).await?;
        let took = started.elapsed();
        assert!(
            took < bound,
            "session/new waited {took:?}, as long as the list's bound"
        );
        let turn = c.prompt(&session, "hello").await?;
        assert_eq!(turn.stop_reason, StopReason::EndTurn);
        Ok(turn
            .updates
            .iter()
            .find_map(|u| match u {
                SessionUpdate::UsageUpdate(usage) => Some(usage.size),
                _ => None,
            })
            .expect("a usage_update"))
    })
    .await;
    assert_eq!(size, 128_000);
    assert_eq!(fake.gets(), ["/v1/models"]);
}

/// `--model openai` alone: the picker holds the chat models the server lists (the first the
/// default), the first prompt goes to the first, and a chosen one gets the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_alone_offers_the_models_its_server_lists() {
    let fake = FakeModel::start(vec![
        openai::reply(&["from a"], &[]),
        openai::reply(&["from b"], &[]),
    ])
    .await;
    fake.on_get(
        "/v1/models",
        ok(json!({"object": "list", "data": [
            {"id": "model-a", "object": "model", "owned_by": "me", "context_length": 9000},
            {"id": "text-embedding-3-small", "object": "model"},
            {"id": "model-b", "object": "model", "owned_by": "me"},
        ]})),
    );
    let (_tmp, dir) = temp_dir();
    let base = format!("{}/v1", fake.base);
    let (options, _) = converse_with(served("openai", &base, &[]), "picker", async |mut c| {
        let answer = c
            .connection()
            .send_request(NewSessionRequest::new(&dir))
            .block_task()
            .await?;
        let options = serde_json::to_value(&answer.config_options).unwrap();
        let session = answer.session_id;
        let turn = c.prompt(&session, "hello a").await?;
        assert_eq!(turn.stop_reason, StopReason::EndTurn);
        let size = turn.updates.iter().find_map(|u| match u {
            SessionUpdate::UsageUpdate(usage) => Some(usage.size),
            _ => None,
        });
        assert_eq!(size, Some(9000), "the window of the listed model");
        c.connection()
            .send_request(SetSessionConfigOptionRequest::new(
                session.clone(),
                "model".to_string(),
                "openai:model-b",
            ))
            .block_task()
            .await?;
        let turn = c.prompt(&session, "hello b").await?;
        assert_eq!(turn.stop_reason, StopReason::EndTurn);
        Ok(options)
    })
    .await;
    let model = options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .unwrap_or_else(|| panic!("no model option: {options}"));
    assert_eq!(model["currentValue"], "openai:model-a");
    let values: Vec<&str> = model["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["openai:model-a", "openai:model-b"]);
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].body["model"], "model-a");
    assert_eq!(requests[1].body["model"], "model-b");
    assert_eq!(fake.gets(), ["/v1/models"], "read once for the process");
}

/// `--model openai` alone and no list: the session opens (without a model option) and a
/// prompt fails with what to do, naming the list's URL without its credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_alone_without_its_list_says_what_to_do() {
    let fake = FakeModel::start(Vec::new()).await;
    fake.on_get(
        "/v1/models",
        Answer::Status(
            500,
            Vec::new(),
            json!({"error": {"message": "list broke"}}).to_string(),
        ),
    );
    let (_tmp, dir) = temp_dir();
    let base = fake.base.replace("http://", "http://user:tok3n-secret@") + "/v1";
    let (message, transcript) =
        converse_with(served("openai", &base, &[]), "no list", async |mut c| {
            let answer = c
                .connection()
                .send_request(NewSessionRequest::new(&dir))
                .block_task()
                .await?;
            let options = serde_json::to_value(&answer.config_options).unwrap();
            assert!(
                !options
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|o| o["id"] == "model"),
                "{options}"
            );
            let error = c
                .prompt(&answer.session_id, "hello")
                .await
                .expect_err("no model to ask");
            Ok(format!("{} {:?}", error.message, error.data))
        })
        .await;
    assert!(
        message.contains("--model openai:NAME")
            && message.contains("list broke")
            && message.contains("/v1/models"),
        "{message}"
    );
    let all = format!(
        "{}\n{}",
        transcript.lines().join("\n"),
        transcript.stderr().join("\n")
    );
    assert!(!all.contains("tok3n-secret"), "{all}");
    assert!(fake.requests().is_empty(), "no model was asked");
}
