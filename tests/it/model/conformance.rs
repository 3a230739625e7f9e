//! Recorded reality: provider responses as the providers published them
//! (`tests/it/fixtures/providers/`, each file's source in `SOURCES.md`), replayed byte for byte
//! by the fake provider through the real driver and turn.

use serde_json::json;

use acp_bash::driver::model::Provider;

use super::harness::{driver, prompt, said, Event, Host};
use crate::support::fake_model::{anthropic, Answer, FakeModel};

/// A recorded SSE stream as the events the fake writes one by one (a recorded file leaves out
/// the blank line after its last event; the server sent it).
fn recorded(path: &str) -> Vec<String> {
    let path = format!(
        "{}/tests/it/fixtures/providers/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    text.trim_end()
        .split("\n\n")
        .map(|event| format!("{event}\n\n"))
        .collect()
}

/// Anthropic's own recorded tool-use stream (a `ping`, input in pieces, an unknown `caller`
/// field): the text is shown, the call is kept whole with its id and input, and answered (it
/// names a tool acp-bash does not have: nothing runs) before the next request.
#[tokio::test]
async fn anthropic_recorded_tool_use_stream() {
    let fake = FakeModel::start(vec![
        Answer::Sse(recorded("anthropic/tool_use.sse")),
        anthropic::reply(&["No weather tool here."], &[]),
    ])
    .await;
    let host = Host::new();
    let driver = driver(Provider::Anthropic, &fake.base);
    host.turn(&driver, &prompt("weather in Paris?"))
        .await
        .unwrap();
    let events = host.take_events();
    assert!(
        said(&events).starts_with("I'll check the current weather in Paris for you."),
        "{events:?}"
    );
    assert!(!events.iter().any(|e| matches!(e, Event::Call(_))));
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let messages = requests[1].body["messages"].as_array().unwrap().clone();
    let assistant = &messages[messages.len() - 2];
    assert_eq!(assistant["role"], "assistant");
    let content = assistant["content"].as_array().unwrap();
    let tool_use = content.iter().find(|b| b["type"] == "tool_use").unwrap();
    assert_eq!(tool_use["id"], "toolu_01NRLabsLyVHZPKxbKvkfSMn");
    assert_eq!(tool_use["name"], "get_weather");
    assert_eq!(tool_use["input"], json!({"location": "Paris"}));
    let answer = &messages[messages.len() - 1]["content"][0];
    assert_eq!(answer["type"], "tool_result");
    assert_eq!(answer["tool_use_id"], "toolu_01NRLabsLyVHZPKxbKvkfSMn");
    assert_eq!(answer["is_error"], true);
}
