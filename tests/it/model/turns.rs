//! Model turns that go well: streamed text and thinking, tool calls whose arguments arrive in
//! pieces (several per reply, each answered with its own id), `cd` carrying over, malformed
//! arguments, the step limit; in both wire formats.

use acp_bash::driver::model::{Message, ModelDriver, Provider};
use acp_bash::driver::StopReason;
use serde_json::{json, Value};

use super::harness::{config, driver, prompt, said, Event, Host, KEY};
use crate::support::fake_model::{anthropic, openai, Answer, FakeModel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_streams_thinking_and_text_then_ends_the_turn() {
    let fake = FakeModel::start(vec![Answer::Sse(openai::events(
        &["Let me ", "think."],
        &["Hel", "lo ", "there."],
        &[],
    ))])
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("hi"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert_eq!(
        host.take_events(),
        [
            Event::Thought("Let me ".into()),
            Event::Thought("think.".into()),
            Event::Message("Hel".into()),
            Event::Message("lo ".into()),
            Event::Message("there.".into()),
            Event::Usage(120, 128_000),
        ]
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = &request.body;
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["messages"][0]["role"], "system");
    let system = body["messages"][0]["content"].as_str().unwrap();
    for told in [
        "bash",
        "no stdin",
        "background: true",
        "Sandbox mode `full`",
        "job_output",
    ] {
        assert!(
            system.contains(told),
            "the system prompt lacks {told:?}: {system}"
        );
    }
    assert!(system.contains(&host.dir.path().display().to_string()));
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "hi"})
    );
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["bash", "job_output", "job_kill"]);
}

/// Two calls in one reply, their arguments in pieces: both run, in order, in the session's cwd
/// (the first call's `cd` carries over to the second), and each is answered with its own id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_tool_calls_in_pieces_run_in_order_and_are_answered_by_id() {
    let fake = FakeModel::start(vec![
        openai::reply(
            &["Looking."],
            &[
                (
                    "call_a",
                    "bash",
                    &["{\"comm", "and\": \"mkdir -p sub && cd ", "sub\"}"],
                ),
                (
                    "call_b",
                    "bash",
                    &["{\"command\":\"pwd\",", "\"description\":\"Where\"}"],
                ),
            ],
        ),
        openai::reply(&["Done."], &[]),
    ])
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("where?"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    let calls: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::Call(_)))
        .collect();
    assert_eq!(
        calls,
        [
            &Event::Call("mkdir -p sub && cd sub".into()),
            &Event::Call("pwd".into())
        ]
    );
    assert_eq!(said(&events), "Looking.Done.");
    let second = &fake.requests()[1].body["messages"];
    assert_eq!(second[2]["role"], "assistant");
    assert_eq!(second[2]["tool_calls"][0]["id"], "call_a");
    assert_eq!(
        second[2]["tool_calls"][0]["function"]["arguments"],
        "{\"command\": \"mkdir -p sub && cd sub\"}"
    );
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], "call_a");
    assert_eq!(second[3]["content"], "[exit code: 0]");
    assert_eq!(second[4]["tool_call_id"], "call_b");
    let sub = host.dir.path().canonicalize().unwrap().join("sub");
    assert_eq!(
        second[4]["content"],
        format!("{}\n[exit code: 0]", sub.display())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_streams_thinking_text_and_tool_use_in_its_format() {
    let fake = FakeModel::start(vec![
        Answer::Sse(anthropic::events(
            &["Hmm."],
            &["I will ", "count."],
            &[
                ("toolu_1", "bash", &["{\"command\": \"echo", " one\"}"]),
                ("toolu_2", "bash", &["{\"command\": \"exit 3\"}"]),
            ],
        )),
        anthropic::reply(&["Two calls."], &[]),
    ])
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::Anthropic, &fake.base), &prompt("count"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    assert_eq!(events[0], Event::Thought("Hmm.".into()));
    assert_eq!(said(&events), "I will count.Two calls.");
    assert!(events.contains(&Event::Usage(120, 200_000)));
    let requests = fake.requests();
    let first = &requests[0];
    assert_eq!(first.path, "/v1/messages");
    assert_eq!(first.header("x-api-key"), Some(KEY));
    assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(first.header("authorization"), None);
    assert_eq!(first.body["stream"], true);
    assert_eq!(first.body["max_tokens"], 8192);
    assert!(first.body["system"][0]["text"]
        .as_str()
        .unwrap()
        .contains("bash"));
    assert_eq!(first.body["tools"][0]["name"], "bash");
    assert!(first.body["tools"][0]["input_schema"]["properties"]["background"].is_object());
    let messages = &requests[1].body["messages"];
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "echo one"}})
    );
    assert_eq!(messages[2]["role"], "user");
    let results: Vec<(&str, &str)> = messages[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["tool_use_id"].as_str().unwrap(),
                b["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        results,
        [
            ("toolu_1", "one\n[exit code: 0]"),
            ("toolu_2", "[exit code: 3]")
        ]
    );
}

/// Bad arguments run nothing; the model is told what to fix and gets to try again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_arguments_run_nothing_and_say_what_to_fix() {
    let fake = FakeModel::start(vec![
        openai::reply(
            &[],
            &[
                ("c1", "bash", &["{\"cmd\": \"touch made-by-c1\"}"]),
                ("c2", "bash", &["{\"command\": \"touch made-by-c2\""]),
                ("c3", "python", &["{\"code\": \"1\"}"]),
                (
                    "c4",
                    "bash",
                    &["{\"command\": \"touch ok\", \"background\": \"yes\"}"],
                ),
            ],
        ),
        openai::reply(&["Sorry."], &[]),
    ])
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("go"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert!(!host
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::Call(_))));
    for file in ["made-by-c1", "made-by-c2", "ok"] {
        assert!(!host.dir.path().join(file).exists(), "{file} was made");
    }
    let messages = fake.requests()[1].body["messages"].clone();
    let answer = |i: usize| messages[i]["content"].as_str().unwrap().to_string();
    assert!(answer(3).contains("unknown field `cmd`"), "{}", answer(3));
    assert!(
        answer(3).contains("expected {\"command\": string"),
        "{}",
        answer(3)
    );
    assert!(answer(4).contains("not JSON"), "{}", answer(4));
    assert!(answer(5).contains("no tool `python`"), "{}", answer(5));
    assert!(
        answer(6).contains("`background` must be true or false"),
        "{}",
        answer(6)
    );
    assert_eq!(messages[6]["tool_call_id"], "c4");
}

/// A model that never stops calling tools is stopped after `--max-steps` requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_limit_ends_the_turn_with_max_turn_requests() {
    let again = || openai::reply(&[], &[("c", "bash", &["{\"command\":\"true\"}"])]);
    let fake = FakeModel::start(vec![again(), again(), again(), again()]).await;
    let mut config = config(Provider::OpenAi, &fake.base);
    config.max_steps = 3;
    let driver = acp_bash::driver::model::ModelDriver::new(config);
    let host = Host::new();
    let ended = host.turn(&driver, &prompt("loop")).await;
    assert_eq!(ended, Ok(StopReason::MaxTurnRequests));
    assert_eq!(fake.requests().len(), 3);
    let events = host.take_events();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::Call(_)))
            .count(),
        3
    );
    assert!(
        said(&events).contains("3 model requests"),
        "{}",
        said(&events)
    );
    // The conversation ends with the last call's result; the next prompt follows it.
    let conversation = driver.conversation("s1");
    assert!(matches!(
        conversation.last(),
        Some(acp_bash::driver::model::Message::ToolResult { .. })
    ));
}

/// The conversation carries over from one prompt to the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_prompt_sends_the_earlier_conversation() {
    let fake = FakeModel::start(vec![
        anthropic::reply(&[], &[("t1", "bash", &["{\"command\":\"echo first\"}"])]),
        anthropic::reply(&["ok"], &[]),
        anthropic::reply(&["again"], &[]),
    ])
    .await;
    let driver = driver(Provider::Anthropic, &fake.base);
    let host = Host::new();
    host.turn(&driver, &prompt("one")).await.unwrap();
    host.turn(&driver, &prompt("two")).await.unwrap();
    let messages = fake.requests()[2].body["messages"].clone();
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    assert_eq!(
        messages[2]["content"][0]["content"],
        "first\n[exit code: 0]"
    );
    assert_eq!(
        messages[4]["content"],
        json!([{"type": "text", "text": "two", "cache_control": {"type": "ephemeral"}}])
    );
    let _: &Value = &messages;
}

/// A long session stays within its bound: the oldest tool output is trimmed first (the
/// prompts stay), then the oldest turns go; the last turn is whole, and what is sent next
/// starts with a user prompt (no result without its call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_stays_bounded_and_the_oldest_output_goes_first() {
    let call = "{\"command\":\"head -c 3000 /dev/zero | tr '\\\\0' x\"}";
    let mut answers = Vec::new();
    for n in 0..6 {
        let id = format!("c{n}");
        answers.push(openai::reply(&[], &[(id.as_str(), "bash", &[call])]));
        answers.push(openai::reply(&["ok"], &[]));
    }
    let fake = FakeModel::start(answers).await;
    let mut config = config(Provider::OpenAi, &fake.base);
    config.max_conversation_bytes = 4 * 1024;
    let driver = ModelDriver::new(config);
    let host = Host::new();
    let size = |messages: &[Message]| acp_bash::driver::model::history::size(messages);
    let results = |messages: &[Message]| -> Vec<usize> {
        messages
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult { content, .. } => Some(content.len()),
                _ => None,
            })
            .collect()
    };
    let mut sizes = Vec::new();
    for n in 0..6 {
        let text = format!("prompt {n} {}", "p".repeat(300));
        host.turn(&driver, &prompt(&text)).await.unwrap();
        let conversation = driver.conversation("s1");
        assert!(
            size(&conversation) <= 4 * 1024,
            "turn {n}: {}",
            size(&conversation)
        );
        sizes.push(results(&conversation));
        if n == 1 {
            // Two turns: the first's output trimmed, both prompts kept.
            let prompts = conversation
                .iter()
                .filter(|m| matches!(m, Message::User(_)))
                .count();
            assert_eq!(prompts, 2);
        }
    }
    assert!(sizes[1][0] < 100 && sizes[1][1] > 3000, "{sizes:?}");
    let last = driver.conversation("s1");
    assert!(matches!(&last[0], Message::User(_)), "{last:?}");
    assert_eq!(last.last(), Some(&Message::assistant("ok", vec![])));
    assert!(results(&last).last().unwrap() > &3000);
    assert!(
        !last
            .iter()
            .any(|m| matches!(m, Message::User(t) if t.starts_with("prompt 0 "))),
        "the oldest turn is dropped once trimming is not enough"
    );
    // What the model got last is the bounded conversation (plus the system prompt and tools).
    let sent = fake.requests().last().unwrap().body["messages"].clone();
    assert!(
        !sent.to_string().contains("prompt 0 "),
        "the model still got the oldest turn"
    );
}
