//! Errors the user can act on: retries shown while they happen (and never sent to the model),
//! `insufficient_quota` final, overflow recognised by its code, credentials in the base URL
//! never shown, malformed arguments answered with the expected fields, embedded resources
//! bounded.

use acp_bash::driver::model::{Message, ModelDriver, Provider};
use acp_bash::driver::{Prompt, PromptBlock, StopReason};
use serde_json::json;

use super::harness::{config, driver, prompt, said, Event, Host, KEY};
use crate::support::fake_model::{anthropic, openai, Answer, FakeModel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_are_shown_while_they_happen_and_never_reach_the_model() {
    let fake = FakeModel::start(vec![
        openai::error(503, &[], "The server is overloaded", "server_error"),
        openai::reply(&["ok"], &[]),
        openai::reply(&["second"], &[]),
    ])
    .await;
    let host = Host::new();
    let driver = driver(Provider::OpenAi, &fake.base);
    assert_eq!(
        host.turn(&driver, &prompt("hi")).await,
        Ok(StopReason::EndTurn)
    );
    let events = host.take_events();
    let notice = events
        .iter()
        .position(|e| matches!(e, Event::Thought(t) if t.contains("trying again") && t.contains("retry 1 of 4")))
        .unwrap_or_else(|| panic!("no retry notice: {events:?}"));
    let answer = events
        .iter()
        .position(|e| e == &Event::Message("ok".into()))
        .unwrap();
    assert!(notice < answer, "{events:?}");
    host.turn(&driver, &prompt("again")).await.unwrap();
    let sent = fake.requests()[2].body.to_string();
    assert!(!sent.contains("trying again"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_quota_is_final_and_says_what_to_do() {
    let fake = FakeModel::start(vec![openai::error(
        429,
        &[("retry-after", "1")],
        "You exceeded your current quota, please check your plan and billing details.",
        "insufficient_quota",
    )])
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("hi"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert_eq!(fake.requests().len(), 1, "not retried");
    let text = said(&host.take_events());
    assert!(
        text.contains("no credit left") && text.contains("OPENAI_API_KEY"),
        "{text}"
    );
    assert!(!text.contains(KEY));
}

/// llama.cpp's overflow (`type: exceed_context_size_error`, a numeric `code`) is an overflow:
/// the user is told the conversation no longer fits, not to check `--model`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_cpp_overflow_is_recognised_by_its_type() {
    let body = json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}});
    let fake = FakeModel::start(vec![Answer::Status(400, Vec::new(), body.to_string())]).await;
    let host = Host::new();
    host.turn(&driver(Provider::OpenAi, &fake.base), &prompt("hi"))
        .await
        .unwrap();
    let text = said(&host.take_events());
    assert!(text.contains("no longer fits"), "{text}");
}

/// A base URL with `user:token@` never shows its credentials: not in the message of a
/// refused request, nor in one of a failed connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_the_base_url_are_never_shown() {
    let fake = FakeModel::start(vec![openai::error(
        400,
        &[],
        "bad model",
        "model_not_found",
    )])
    .await;
    let with_credentials = fake.base.replace("http://", "http://user:tok3n-secret@");
    let host = Host::new();
    host.turn(&driver(Provider::OpenAi, &with_credentials), &prompt("hi"))
        .await
        .unwrap();
    let text = said(&host.take_events());
    assert!(text.contains("[redacted]@127.0.0.1"), "{text}");
    assert!(!text.contains("tok3n-secret"), "{text}");

    // A gateway's `?key=`: the request goes to the path before the query, and the message
    // names the endpoint with the key's value redacted.
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let fake = FakeModel::start(vec![match provider {
            Provider::OpenAi => openai::error(400, &[], "bad model", "model_not_found"),
            _ => anthropic::error(400, &[], "invalid_request_error", "bad model"),
        }])
        .await;
        let base = fake.base.replace("http://", "http://user:tok3n-secret@") + "/gw?key=k3y-secret";
        let mut config = config(provider, &fake.base);
        config.base_url = base;
        let host = Host::new();
        host.turn(&ModelDriver::new(config), &prompt("hi"))
            .await
            .unwrap();
        let text = said(&host.take_events());
        let path = match provider {
            Provider::OpenAi => "/gw/chat/completions?key=k3y-secret",
            _ => "/gw/v1/messages?key=k3y-secret",
        };
        assert_eq!(fake.requests()[0].path, path);
        assert!(text.contains("?key=[redacted]"), "{text}");
        assert!(
            !text.contains("tok3n-secret") && !text.contains("k3y-secret"),
            "{text}"
        );
    }

    // Nothing listens there: every retry fails to connect.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let host = Host::new();
    host.turn(
        &driver(
            Provider::OpenAi,
            &format!("http://user:tok3n-secret@127.0.0.1:{port}"),
        ),
        &prompt("hi"),
    )
    .await
    .unwrap();
    let events = host.take_events();
    let shown = format!("{events:?}");
    assert!(shown.contains("failed"), "{shown}");
    assert!(!shown.contains("tok3n-secret"), "{shown}");
}

/// Arguments that are not JSON run nothing and are answered with the fields the tool takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_arguments_are_answered_with_the_expected_fields() {
    let fake = FakeModel::start(vec![
        openai::reply(&[], &[("c1", "bash", &["{\"command\": \"cat <<EOF"])]),
        openai::reply(&["sorry"], &[]),
    ])
    .await;
    let host = Host::new();
    let driver = driver(Provider::OpenAi, &fake.base);
    host.turn(&driver, &prompt("write")).await.unwrap();
    let answer = fake.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    let content = answer["content"].as_str().unwrap();
    assert!(
        content.contains("Nothing ran") && content.contains("\"command\": string"),
        "{content}"
    );
    assert!(!host
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::Call(_))));
}

/// An embedded resource past 64 KiB is cut at a line end; the model is told where and how to
/// read the rest, the user is told what was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_resources_are_bounded() {
    let fake = FakeModel::start(vec![openai::reply(&["read"], &[])]).await;
    let host = Host::new();
    let line = "x".repeat(99) + "\n";
    let big = line.repeat(1000); // 100 000 bytes
    let mut prompt = Prompt::text_only("look");
    prompt.blocks.push(PromptBlock::Resource {
        uri: "file:///w/big.txt".into(),
        text: Some(big),
        mime_type: None,
    });
    let driver = ModelDriver::new(config(Provider::OpenAi, &fake.base));
    host.turn(&driver, &prompt).await.unwrap();
    let sent = fake.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(sent.len() < 64 * 1024 + 1024, "{}", sent.len());
    assert!(
        sent.contains("cut here: the first 65500 of 100000 bytes"),
        "{}",
        &sent[sent.len() - 300..]
    );
    assert!(said(&host.take_events()).contains("the first 64 KiB of file:///w/big.txt"));
    let Message::User(kept) = &driver.conversation("s1")[0] else {
        panic!("not a user message");
    };
    assert_eq!(kept, &sent);
}
