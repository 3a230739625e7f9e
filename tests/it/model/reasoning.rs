//! Reasoning models against fakes that refuse what the real servers refuse: OpenAI's
//! `max_completion_tokens` and `reasoning_effort`; Anthropic's extended thinking with its signed
//! blocks sent back in a tool loop; DeepSeek's `reasoning_content`; another model never gets a
//! model's reasoning; a stream that ends after its finish reason without `[DONE]`. Gemini's
//! thought signatures and summaries and OpenRouter's `reasoning_details` are proved against
//! their recorded shapes in `model::conformance`.

use std::sync::Arc;

use acp_bash::driver::model::{ModelConfig, ModelDriver, Provider};
use acp_bash::driver::StopReason;
use serde_json::{json, Value};

use super::harness::{config, driver, prompt, said, Event, Host};
use crate::support::fake_model::{anthropic, openai, refuse, Answer, FakeModel};

const ECHO: &[&str] = &[r#"{"command":"#, r#""echo hi"}"#];

fn thoughts(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Thought(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn assistant(body: &Value, n: usize) -> Value {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .nth(n)
        .cloned()
        .unwrap_or(Value::Null)
}

/// An OpenAI reasoning model refuses `max_tokens`: the one retry with `max_completion_tokens`
/// succeeds unseen, and the next requests use it from the start; `reasoning_effort` carries
/// the session's level.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_reasoning_models_get_max_completion_tokens_and_the_effort() {
    let fake = FakeModel::start_refusing(
        vec![openai::reply(&["one"], &[]), openai::reply(&["two"], &[])],
        Arc::new(refuse::openai_reasoning_model),
    )
    .await;
    let host = Host::new();
    let driver = driver(Provider::OpenAi, &fake.base);
    let ended = host
        .turn_choosing(&driver, &prompt("hi"), None, Some("high"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert_eq!(said(&host.take_events()), "one");
    let ended = host.turn(&driver, &prompt("again")).await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert_eq!(said(&host.take_events()), "two");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3, "one refusal, then two answers");
    assert_eq!(requests[0].body["max_tokens"], 8192);
    assert_eq!(requests[1].body["max_completion_tokens"], 8192);
    assert!(requests[1].body.get("max_tokens").is_none());
    assert_eq!(requests[1].body["reasoning_effort"], "high");
    assert_eq!(requests[2].body["max_completion_tokens"], 8192);
    // The default level sends no effort.
    assert!(requests[2].body.get("reasoning_effort").is_none());
}

/// OpenAI's own API gets `max_completion_tokens` from the first request.
#[test]
fn openais_own_api_gets_max_completion_tokens_at_once() {
    use acp_bash::driver::model::openai::Options;
    assert!(Options::for_base("https://api.openai.com/v1").max_completion_tokens);
    assert!(Options::for_base("https://u:p@API.openai.com:443/v1?x=1").max_completion_tokens);
    assert!(Options::for_base("https://r.openai.azure.com/openai").max_completion_tokens);
    assert!(!Options::for_base("http://127.0.0.1:8080/v1").max_completion_tokens);
    assert!(!Options::for_base("https://api.openai.com.evil.example/v1").max_completion_tokens);
}

/// A gateway that refuses `stream_options` gets one retry without it; an error that names no
/// field is not retried that way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_stream_options_is_dropped_once() {
    let fake = FakeModel::start_refusing(
        vec![openai::reply(&["fine"], &[])],
        Arc::new(refuse::no_stream_options),
    )
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("hi"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert_eq!(said(&host.take_events()), "fine");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0].body.get("stream_options").is_some());
    assert!(requests[1].body.get("stream_options").is_none());

    let fake = FakeModel::start(vec![openai::error(
        400,
        &[],
        "Invalid value for 'temperature'",
        "invalid_value",
    )])
    .await;
    let host = Host::new();
    host.turn(&driver(Provider::OpenAi, &fake.base), &prompt("hi"))
        .await
        .unwrap();
    assert_eq!(fake.requests().len(), 1, "not retried");
    assert!(said(&host.take_events()).contains("temperature"));
}

/// Anthropic with thinking on: the budget comes on top of `max_tokens`; the signed thinking
/// block (its signature streamed in two `signature_delta` pieces) goes back unchanged at the
/// start of its message within the tool loop, which the fake checks as the real API does; the
/// thoughts are shown once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_thinking_blocks_go_back_signed_in_the_tool_loop() {
    let fake = FakeModel::start_refusing(
        vec![
            Answer::Sse(anthropic::events(
                &["I should ", "run echo."],
                &[],
                &[("toolu_1", "bash", ECHO)],
            )),
            Answer::Sse(anthropic::events(&["It said hi."], &["Done."], &[])),
        ],
        Arc::new(refuse::anthropic_thinking),
    )
    .await;
    let host = Host::new();
    let driver = driver(Provider::Anthropic, &fake.base);
    let ended = host
        .turn_choosing(&driver, &prompt("say hi"), None, Some("medium"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    assert_eq!(said(&events), "Done.");
    assert_eq!(thoughts(&events), "I should run echo.It said hi.");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(
        requests[0].body["thinking"],
        json!({"type": "enabled", "budget_tokens": 8192})
    );
    assert_eq!(requests[0].body["max_tokens"], 8192 + 8192);
    let sent = assistant(&requests[1].body, 0);
    assert_eq!(
        sent["content"][0],
        json!({"type": "thinking", "thinking": "I should run echo.",
               "signature": anthropic::signature("I should run echo.")})
    );
    assert_eq!(sent["content"][1]["type"], "tool_use");
}

/// The fake refuses what the real API refuses: a tool loop whose thinking block was dropped,
/// and a thinking block whose text no longer matches its signature.
#[test]
fn the_anthropic_fake_refuses_a_missing_or_altered_thinking_block() {
    let body = |content: Value| {
        json!({"max_tokens": 9000, "thinking": {"type": "enabled", "budget_tokens": 1024},
               "messages": [{"role": "user", "content": [{"type": "text", "text": "go"}]},
                            {"role": "assistant", "content": content},
                            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}]})
    };
    let tool_use = json!({"type": "tool_use", "id": "t", "name": "bash", "input": {}});
    let thinking = |text: &str, signed: &str| json!({"type": "thinking", "thinking": text, "signature": anthropic::signature(signed)});
    let refused = |body: Value| match refuse::anthropic_thinking(&body) {
        Some(Answer::Status(400, _, message)) => message,
        other => panic!("not refused: {other:?}"),
    };
    assert!(refused(body(json!([tool_use.clone()]))).contains("must start with a thinking block"));
    assert!(refused(body(json!([thinking("b", "a"), tool_use.clone()])))
        .contains("Invalid `signature`"));
    assert!(refuse::anthropic_thinking(&body(json!([thinking("a", "a"), tool_use]))).is_none());
    let mut low = body(json!([]));
    low["max_tokens"] = json!(1024);
    assert!(refused(low).contains("budget_tokens"));
}

/// DeepSeek's thinking mode: `reasoning_content` goes back on the message with the tool calls
/// (the fake refuses the loop without it); the thoughts show once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deepseek_reasoning_content_goes_back_with_the_tool_calls() {
    let fake = FakeModel::start_refusing(
        vec![
            Answer::Sse(openai::events(
                &["Run ", "echo."],
                &[],
                &[("call_a", "bash", ECHO)],
            )),
            Answer::Sse(openai::events(&["Good."], &["It printed hi."], &[])),
        ],
        Arc::new(refuse::deepseek_thinking),
    )
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("say hi"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    assert_eq!(said(&events), "It printed hi.");
    assert_eq!(thoughts(&events), "Run echo.Good.");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(
        assistant(&requests[1].body, 0)["reasoning_content"],
        "Run echo."
    );
}

/// A session that switches model drops the first model's reasoning: the other provider never
/// gets it, and neither does the first model when the session comes back to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_model_never_gets_a_models_reasoning() {
    let fake = FakeModel::start(vec![
        Answer::Sse(anthropic::events(
            &["Secret thoughts."],
            &[],
            &[("toolu_1", "bash", ECHO)],
        )),
        Answer::Sse(anthropic::events(&[], &["Done."], &[])),
        Answer::Sse(openai::events(&[], &["From openai."], &[])),
        Answer::Sse(anthropic::events(&[], &["Back."], &[])),
    ])
    .await;
    let mut other = config(Provider::OpenAi, &fake.base);
    other.model = "other".into();
    let driver = ModelDriver::new(config(Provider::Anthropic, &fake.base)).with_model(other);
    let host = Host::new();
    let anthropic_id = Some("anthropic:fake-model");
    host.turn_choosing(&driver, &prompt("one"), anthropic_id, Some("low"))
        .await
        .unwrap();
    host.turn_choosing(&driver, &prompt("two"), Some("openai:other"), Some("low"))
        .await
        .unwrap();
    host.turn_choosing(&driver, &prompt("three"), anthropic_id, Some("low"))
        .await
        .unwrap();
    let requests = fake.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    assert!(requests[1]
        .body
        .to_string()
        .contains(&anthropic::signature("Secret thoughts.")));
    for later in &requests[2..] {
        let text = later.body.to_string();
        assert!(
            !text.contains("Secret thoughts") && !text.contains("EqQBCkgI"),
            "{text}"
        );
    }
    let _: &ModelConfig = driver.config();
}

/// A stream that ends after its finish reason without `[DONE]` (nor usage) ended well: its
/// text shows once and it is not asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_ends_after_its_finish_reason_is_not_retried() {
    let mut events = openai::events(&[], &["Only ", "once."], &[]);
    events.truncate(events.len() - 2); // no usage chunk, no [DONE]
    let fake = FakeModel::start(vec![Answer::Drop(events), openai::reply(&["again"], &[])]).await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("hi"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert_eq!(said(&host.take_events()), "Only once.");
    assert_eq!(fake.requests().len(), 1);
}
