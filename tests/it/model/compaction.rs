//! Compaction through the real turn and the fake provider: near 80% of `--context-window` the
//! model writes a summary that replaces the conversation (the user's messages kept); a context
//! overflow is answered the same way before anything is dropped; `/compact` asks for it; each
//! is said to the user, never silent.

use acp_bash::driver::model::compaction::{SUMMARY_HEADER, SUMMARY_PROMPT};
use acp_bash::driver::model::{Message, ModelDriver, Provider};
use acp_bash::driver::StopReason;
use serde_json::Value;

use super::harness::{config, prompt, said, Host};
use crate::support::fake_model::{anthropic, openai, FakeModel};

fn last_user_text(body: &Value) -> String {
    let messages = body["messages"].as_array().unwrap();
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &last["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.last().unwrap()["text"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        _ => String::new(),
    }
}

/// A command whose output is about 4 000 tokens.
const BIG: &str = "{\"command\":\"head -c 16000 /dev/zero | tr '\\\\0' x\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_the_window_the_model_summarises_and_the_summary_replaces_the_conversation() {
    let fake = FakeModel::start(vec![
        openai::reply(&[], &[("call_1", "bash", &[BIG])]),
        openai::reply(&["The user wants x; 16000 x were printed."], &[]),
        openai::reply(&["Done."], &[]),
    ])
    .await;
    let mut config = config(Provider::OpenAi, &fake.base);
    config.context_window = 4000;
    let driver = ModelDriver::new(config);
    let host = Host::new();
    let ended = host.turn(&driver, &prompt("print many x")).await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    // The second request asks for the summary, after the whole conversation.
    assert_eq!(last_user_text(&requests[1].body), SUMMARY_PROMPT);
    assert!(requests[1].body.to_string().contains("xxxxxxxx"));
    // The third is the user's message and the summary: the output is gone.
    let sent = requests[2].body["messages"].as_array().unwrap().clone();
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert_eq!(sent[1]["content"], "print many x");
    let summary = sent[2]["content"].as_str().unwrap();
    assert!(summary.starts_with(SUMMARY_HEADER), "{summary}");
    assert!(summary.contains("16000 x were printed"));
    assert!(!requests[2].body.to_string().contains("xxxxxxxx"));
    // Said, not silent; the summary is not shown as the agent's answer.
    let text = said(&host.take_events());
    assert!(
        text.contains("[Compacting the conversation: it holds about"),
        "{text}"
    );
    assert!(text.contains("[Compacted: the 3 messages so far"), "{text}");
    assert!(!text.contains("16000 x were printed"), "{text}");
    assert!(text.ends_with("Done."), "{text}");
    let kept = driver.conversation("s1");
    assert_eq!(kept[0], Message::User("print many x".into()));
    assert!(matches!(&kept[1], Message::User(t) if t.starts_with(SUMMARY_HEADER)));
    assert_eq!(kept[2], Message::assistant("Done.", vec![]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overflow_is_answered_by_a_summary_before_anything_is_dropped() {
    let fake = FakeModel::start(vec![
        anthropic::reply(&[], &[("toolu_1", "bash", &["{\"command\":\"echo hi\"}"])]),
        anthropic::reply(&["Said hi."], &[]),
        anthropic::error(
            400,
            &[],
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
        ),
        anthropic::reply(&["Summary: the user greeted."], &[]),
        anthropic::reply(&["Again."], &[]),
    ])
    .await;
    let driver = ModelDriver::new(config(Provider::Anthropic, &fake.base));
    let host = Host::new();
    host.turn(&driver, &prompt("say hi")).await.unwrap();
    host.take_events();
    let ended = host.turn(&driver, &prompt("again")).await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let requests = fake.requests();
    assert_eq!(requests.len(), 5);
    assert_eq!(last_user_text(&requests[3].body), SUMMARY_PROMPT);
    let retried = &requests[4].body["messages"];
    assert_eq!(retried.as_array().unwrap().len(), 1, "{retried}");
    let blocks = retried[0]["content"].as_array().unwrap();
    assert_eq!(blocks[0]["text"], "say hi");
    assert_eq!(blocks[1]["text"], "again");
    assert!(blocks[2]["text"]
        .as_str()
        .unwrap()
        .contains("Summary: the user greeted."));
    let text = said(&host.take_events());
    assert!(text.contains("no longer fits the context window"), "{text}");
    assert!(text.contains("[Compacted:"), "{text}");
    assert!(text.ends_with("Again."), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_compact_summarises_now_and_says_so() {
    let fake = FakeModel::start(vec![
        openai::reply(&[], &[("call_1", "bash", &["{\"command\":\"echo one\"}"])]),
        openai::reply(&["One."], &[]),
        openai::reply(&["We echoed one."], &[]),
    ])
    .await;
    let driver = ModelDriver::new(config(Provider::OpenAi, &fake.base));
    let host = Host::new();
    // Nothing to compact before the model answered.
    host.turn(&driver, &prompt("/compact")).await.unwrap();
    assert!(said(&host.take_events()).contains("Nothing to compact yet"));
    assert!(fake.requests().is_empty());
    host.turn(&driver, &prompt("echo one")).await.unwrap();
    host.take_events();
    let ended = host.turn(&driver, &prompt("/compact")).await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(last_user_text(&requests[2].body), SUMMARY_PROMPT);
    let text = said(&host.take_events());
    assert!(text.contains("you asked (`/compact`)"), "{text}");
    assert!(text.contains("[Compacted: the 4 messages so far"), "{text}");
    let kept = driver.conversation("s1");
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(kept[0], Message::User("echo one".into()));
    // A failed summary leaves the conversation as it was, and says so.
    let ended = host.turn(&driver, &prompt("/compact")).await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert!(said(&host.take_events()).contains("[Compaction failed"));
    assert_eq!(driver.conversation("s1"), kept);
}

/// Through the built binary: a client that advertises `session.compaction` gets
/// `compaction_update`s (in progress, then completed with the summary) and no notice as text;
/// a client that does not gets the notice as the agent's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_reaches_the_wire_as_compaction_updates_or_as_a_message() {
    use acp_bash::acp::client::{AcpClient, ClientProfile};
    use agent_client_protocol::v1::schema::{CompactionStatus, ContentBlock, SessionUpdate};

    use crate::support::acp::{binary, converse_with, temp_dir};

    for profile in [ClientProfile::Compaction, ClientProfile::Plain] {
        let fake = FakeModel::start(vec![
            openai::reply(&[], &[("call_1", "bash", &[BIG])]),
            openai::reply(&["Summary: x printed."], &[]),
            openai::reply(&["Done."], &[]),
        ])
        .await;
        let (_tmp, dir) = temp_dir();
        let base = format!("{}/v1", fake.base);
        let args = [
            "serve",
            "--sandbox",
            "full",
            "--no-history",
            "--model",
            "openai:fake",
            "--base-url",
            &base,
            "--context-window",
            "4000",
        ];
        let client = AcpClient::new(binary(), args)
            .profile(profile)
            .env("XDG_CONFIG_HOME", "/nonexistent/acp-bash-tests")
            .env("OPENAI_API_KEY", super::harness::KEY);
        let (updates, _) = converse_with(client, "compaction", async |mut c| {
            let session = c.new_session(&dir).await?;
            Ok(c.prompt(&session, "print many x").await?.updates)
        })
        .await;
        let text: String = updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                    ContentBlock::Text(text) => Some(text.text.clone()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        let compactions: Vec<_> = updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::CompactionUpdate(update) => Some(update.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(fake.requests().len(), 3);
        if profile == ClientProfile::Compaction {
            assert_eq!(compactions.len(), 2, "{updates:?}");
            assert_eq!(compactions[0].status, CompactionStatus::InProgress);
            assert_eq!(compactions[1].status, CompactionStatus::Completed);
            assert_eq!(compactions[0].compaction_id, compactions[1].compaction_id);
            let summary = serde_json::to_string(&compactions[1]).unwrap();
            assert!(summary.contains("Summary: x printed."), "{summary}");
            assert!(!text.contains("Compact"), "{text}");
        } else {
            assert!(compactions.is_empty());
            assert!(text.contains("[Compacted:"), "{text}");
        }
        assert!(text.ends_with("Done."), "{text}");
    }
}

/// Issue 46, point 3 ("nothing is ever dropped silently"): a compaction takes the user's images
/// out of the conversation (the summary replaces them); the notice says so, and how many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_says_the_images_it_no_longer_sends() {
    use acp_bash::driver::{Prompt, PromptBlock};
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAcCBlCwAAAABJRU5ErkJggg==";
    let fake = FakeModel::start(vec![
        openai::reply(&["A red dot."], &[]),
        openai::reply(&["The user showed a red dot."], &[]),
    ])
    .await;
    let driver = ModelDriver::new(config(Provider::OpenAi, &fake.base));
    let host = Host::new();
    let image = |_| PromptBlock::Image {
        mime_type: "image/png".into(),
        data: PNG.into(),
    };
    let mut blocks = vec![PromptBlock::Text("what is this?".into())];
    blocks.extend((0..2).map(image));
    host.turn(&driver, &Prompt::new(blocks)).await.unwrap();
    let first = fake.requests();
    assert!(
        first[0].body.to_string().contains(PNG),
        "the images were sent"
    );
    host.take_events();
    let ended = host.turn(&driver, &prompt("/compact")).await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let text = said(&host.take_events());
    assert!(text.contains("[Compacted:"), "{text}");
    assert!(
        text.contains("The 2 images you gave are no longer sent to the model"),
        "{text}"
    );
    assert!(
        !driver
            .conversation("s1")
            .iter()
            .any(|m| matches!(m, Message::Images(_))),
        "the images are out of the conversation"
    );
}
