//! Provider reality: error bodies as the servers sent them, quoted whole in public bug reports,
//! and streams written for acp-bash in the exact wire shape that providers' published
//! recordings show (their event types, field order, chunking and edge cases; our own content)
//! (`tests/it/fixtures/providers/`, each file's source or model in `SOURCES.md`), replayed byte
//! for byte by the fake provider over real HTTP on loopback, through the real driver: in this
//! process (`Host`, real turn and bash) or through the served binary over ACP. The fakes refuse
//! what the real servers refuse, with the bodies they answer with.

use std::sync::Arc;

use acp_bash::driver::model::{ModelDriver, Provider};
use acp_bash::driver::StopReason;
use agent_client_protocol::v1::schema::{ContentBlock, SessionUpdate, StopReason as AcpStop};
use serde_json::{json, Value};

use super::harness::{config, driver, prompt, said, served, Event, Host};
use crate::support::acp::{converse_with, temp_dir};
use crate::support::fake_model::{
    anthropic, openai, recorded, recorded_events, refuse, Answer, FakeModel, Refusal,
};

fn thoughts(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Thought(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn usages(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Usage(used, _) => Some(*used),
            _ => None,
        })
        .collect()
}

/// The text of the agent's message chunks on the wire.
fn said_on_the_wire(updates: &[SessionUpdate]) -> String {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The `n`th assistant message of a request body.
fn assistant(body: &Value, n: usize) -> Value {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .nth(n)
        .cloned()
        .unwrap_or_else(|| panic!("no assistant message {n} in {body}"))
}

/// A tool-use stream in the shape of Anthropic's own recorded one (a `ping`, input in pieces
/// the first of them empty, an unknown `caller` field): the text is shown, the call is kept whole with its id and input, and answered (it
/// names a tool acp-bash does not have: nothing runs) before the next request.
#[tokio::test]
async fn anthropic_tool_use_stream_in_its_recorded_shape() {
    let fake = FakeModel::start(vec![
        Answer::Sse(recorded_events("anthropic/tool_use.sse")),
        anthropic::reply(&["No weather tool here."], &[]),
    ])
    .await;
    let host = Host::new();
    let driver = driver(Provider::Anthropic, &fake.base);
    host.turn(&driver, &prompt("time in Oslo?")).await.unwrap();
    let events = host.take_events();
    assert!(
        said(&events).starts_with("Let me look up the local time in Oslo first."),
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
    assert_eq!(tool_use["id"], "toolu_01Xg4RcVn2YtHs8QbWe6PkLa");
    assert_eq!(tool_use["name"], "local_time");
    assert_eq!(
        tool_use["input"],
        json!({"tz": "Europe/Oslo", "format": "24h"})
    );
    let answer = &messages[messages.len() - 1]["content"][0];
    assert_eq!(answer["type"], "tool_result");
    assert_eq!(answer["tool_use_id"], "toolu_01Xg4RcVn2YtHs8QbWe6PkLa");
    assert_eq!(answer["is_error"], true);
}

/// o3-mini through the served binary: a server that is not api.openai.com first gets
/// `max_tokens`, which the o-series refuses with OpenAI's 400 as a bug report quotes it; the one
/// retry carries `max_completion_tokens`, and a stream in o3-mini's recorded shape (its
/// reasoning only counted in `usage`, in a last chunk without choices) is the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn o3_mini_refuses_max_tokens_as_quoted_and_streams_in_its_recorded_shape_through_the_binary()
{
    let (_tmp, dir) = temp_dir();
    let fake = FakeModel::start_refusing(
        vec![Answer::Sse(recorded_events("openai/o3-mini.sse"))],
        Arc::new(refuse::openai_reasoning_model),
    )
    .await;
    let base = format!("{}/v1", fake.base);
    let client = served("openai:o3-mini", &["--base-url", &base], &[]);
    let (updates, _) = converse_with(client, "o3-mini", async |mut c| {
        let session = c.new_session(&dir).await?;
        let answer = c.prompt(&session, "hello").await?;
        assert_eq!(answer.stop_reason, AcpStop::EndTurn);
        Ok(answer.updates)
    })
    .await;
    assert_eq!(said_on_the_wire(&updates), "Hi, ready when you are.");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].body["max_tokens"], 8192);
    assert_eq!(requests[1].body.get("max_tokens"), None);
    assert_eq!(requests[1].body["max_completion_tokens"], 8192);
}

/// gpt-5-nano in the shape Azure's model router streamed it: a first chunk with no choices and
/// an empty id (the prompt's filter results), `content_filter_results` in each choice, usage
/// with reasoning tokens in a last chunk of its own, and no `[DONE]`. The text is
/// shown once, the usage counted, and the end after `finish_reason` is not retried.
#[tokio::test]
async fn gpt_5_as_azure_streamed_it_is_read_whole_and_not_retried() {
    let fake = FakeModel::start(vec![Answer::Sse(recorded_events("openai/gpt-5-nano.sse"))]).await;
    let host = Host::new();
    let ended = host
        .turn(
            &driver(Provider::OpenAi, &fake.base),
            &prompt("capital of Norway?"),
        )
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    assert_eq!(said(&events), "Oslo is Norway's capital.");
    assert_eq!(usages(&events), [21 + 142]);
    assert_eq!(fake.requests().len(), 1);
}

/// vLLM with continuous usage stats: `usage` in every chunk, growing, then once more in a
/// last chunk. The usage is the last one, reported once.
#[tokio::test]
async fn vllm_usage_in_every_chunk_is_counted_once() {
    let fake = FakeModel::start(vec![Answer::Sse(recorded_events(
        "vllm/usage_in_every_chunk.sse",
    ))])
    .await;
    let host = Host::new();
    host.turn(&driver(Provider::OpenAi, &fake.base), &prompt("hi"))
        .await
        .unwrap();
    let events = host.take_events();
    assert_eq!(
        said(&events),
        "Good morning, Ada. What shall we work on today?"
    );
    assert_eq!(usages(&events), [38 + 13]);
}

/// DeepSeek's thinking mode through the served binary: a tool call in the shape of DeepSeek's
/// recorded one (reasoning first, then the call in pieces, usage in the chunk with
/// `finish_reason`, no `[DONE]`) is answered, and the next request carries the call back with its
/// `reasoning_content`, which DeepSeek refuses the loop without (the fake refuses it as
/// DeepSeek words it). The thoughts reach the client once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deepseek_tool_call_goes_back_with_its_reasoning_content_through_the_binary() {
    const REASONING: &str = "The user wants the time in Tokyo. The clock tool can tell me, so I will call it with the city set to \"Tokyo\".";
    let (_tmp, dir) = temp_dir();
    let fake = FakeModel::start_refusing(
        vec![
            Answer::Sse(recorded_events("deepseek/tool_call.sse")),
            openai::reply(&["No clock tool here."], &[]),
        ],
        Arc::new(refuse::deepseek_thinking),
    )
    .await;
    let base = format!("{}/v1", fake.base);
    let client = served("openai:deepseek-v4-flash", &["--base-url", &base], &[]);
    let (updates, _) = converse_with(client, "deepseek", async |mut c| {
        let session = c.new_session(&dir).await?;
        let answer = c.prompt(&session, "time in Tokyo?").await?;
        assert_eq!(answer.stop_reason, AcpStop::EndTurn);
        Ok(answer.updates)
    })
    .await;
    let shown: String = updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentThoughtChunk(chunk) => match &chunk.content {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(shown, REASONING);
    assert_eq!(said_on_the_wire(&updates), "No clock tool here.");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "not retried, not refused: {requests:?}");
    let sent = assistant(&requests[1].body, 0);
    assert_eq!(sent["reasoning_content"], REASONING);
    assert_eq!(
        sent["tool_calls"][0]["id"],
        "call_00_Vq8sLx3TzR6mWk1YbN9HcEpD"
    );
    assert_eq!(
        sent["tool_calls"][0]["function"],
        json!({"name": "clock", "arguments": "{\"city\": \"Tokyo\"}"})
    );
    let messages = requests[1].body["messages"].as_array().unwrap();
    let answer = messages.last().unwrap();
    assert_eq!(answer["role"], "tool");
    assert_eq!(answer["tool_call_id"], "call_00_Vq8sLx3TzR6mWk1YbN9HcEpD");
}

/// What Anthropic checks of a thinking block sent back: its signature is the one the API gave
/// that very text (here: the stream's block's), else 400 as the API words it.
fn signed_as_streamed(thinking: &'static str, signature: &'static str) -> Refusal {
    Arc::new(move |body: &Value| {
        for (i, message) in body["messages"].as_array()?.iter().enumerate() {
            for (j, block) in message["content"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let altered = block["type"] == "thinking"
                    && (block["thinking"] != thinking || block["signature"] != signature);
                if altered {
                    let message = format!(
                        "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                    );
                    return Some(Answer::Status(
                        400,
                        Vec::new(),
                        json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}})
                            .to_string(),
                    ));
                }
            }
        }
        None
    })
}

/// Claude Sonnet 4.5's thinking in the shape of its recorded stream (the signature in one
/// `signature_delta`, the block opened with an empty `signature`, an empty last
/// `thinking_delta`): shown once as thoughts, and sent back in the next request exactly as
/// streamed, which the API checks.
#[tokio::test]
async fn anthropic_streamed_thinking_goes_back_with_its_signature_unchanged() {
    const THINKING: &str = "Last time the answer came to 1212. Halving it now.\n\n1212 ÷ 2 = 606";
    const SIGNATURE: &str = "ErUBCkYIBxgCKkBacpBashWroteThisSignatureForItsOwnTests/NotFromAnyApi+Qm7Lx2Vd9Rk4Tn8Wp3Hs6Jc1Gz5Yb0Fe7Ua2Mq9Xo4Ki8Cw3Ny6Pr1Dt5Sl0Bh7Ev2Jm9Az4Og8Iu3Kx6Wf1Lq5Tc0Rs7Yp2Nd9Hj4Mb8Gv3Zk6Ea1Ow5Qi0Ut7Fn2Xh9Cl4Sy8Pg3Dm6Jb1Vr5Ke0Az/IqTaiB3LwRk+EgyRo9Wc2Nv5Hx8Jb4Td1SGAE=";
    let fake = FakeModel::start_refusing(
        vec![
            Answer::Sse(recorded_events("anthropic/thinking.sse")),
            anthropic::reply(&["303."], &[]),
        ],
        signed_as_streamed(THINKING, SIGNATURE),
    )
    .await;
    let host = Host::new();
    let driver = driver(Provider::Anthropic, &fake.base);
    let first = host
        .turn_choosing(&driver, &prompt("1212 / 2?"), None, Some("high"))
        .await;
    assert_eq!(first, Ok(StopReason::EndTurn));
    let events = host.take_events();
    assert_eq!(thoughts(&events), THINKING);
    assert_eq!(said(&events), "1212 ÷ 2 = 606");
    assert_eq!(usages(&events), [84 + 61]);
    let second = host
        .turn_choosing(&driver, &prompt("and / 2 again?"), None, Some("high"))
        .await;
    assert_eq!(second, Ok(StopReason::EndTurn));
    assert_eq!(said(&host.take_events()), "303.");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let sent = assistant(&requests[1].body, 0);
    assert_eq!(
        sent["content"][0],
        json!({"type": "thinking", "thinking": THINKING, "signature": SIGNATURE})
    );
}

/// A Claude Opus 4.1 turn with high thinking whose reply is cut off by the token limit: the
/// retry's raised budget (16 384 + a 16 384 thinking budget) would pass Opus 4.1's 32 000
/// output tokens, which the API refuses; it is clamped to the ceiling with thinking below it.
#[tokio::test]
async fn opus_4_1_with_high_thinking_stays_within_its_output_ceiling_after_a_cut_off() {
    let cut_off: Vec<String> =
        anthropic::events(&["Write it."], &[], &[("toolu_1", "bash", &["{\"comm"])])
            .into_iter()
            .map(|e| {
                e.replace(
                    "\"stop_reason\":\"tool_use\"",
                    "\"stop_reason\":\"max_tokens\"",
                )
            })
            .collect();
    assert!(cut_off.iter().any(|e| e.contains("\"max_tokens\"")));
    let fake = FakeModel::start_refusing(
        vec![Answer::Sse(cut_off), anthropic::reply(&["Done."], &[])],
        refuse::anthropic_output_cap(32_000),
    )
    .await;
    let host = Host::new();
    let mut config = config(Provider::Anthropic, &fake.base);
    config.model = "claude-opus-4-1-20250805".into();
    let driver = ModelDriver::new(config);
    let ended = host
        .turn_choosing(&driver, &prompt("write a big file"), None, Some("high"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert_eq!(said(&host.take_events()), "Done.");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let limit = |n: usize| requests[n].body["max_tokens"].as_u64().unwrap();
    let budget = |n: usize| {
        requests[n].body["thinking"]["budget_tokens"]
            .as_u64()
            .unwrap()
    };
    assert_eq!((limit(0), budget(0)), (8192 + 16_384, 16_384));
    assert_eq!(limit(1), 32_000, "raised, up to the ceiling");
    assert!(budget(1) >= 1024 && budget(1) < limit(1), "{}", budget(1));
}

/// Each server's context-overflow answer, as recorded (or as its source builds it, see
/// `SOURCES.md`): recognised as an overflow (by code or type where there is one, else by its
/// words), never retried as a failure, and the user reads the server's words, not its JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_servers_context_overflow_is_recognised_and_shown_in_words() {
    let cases = [
        (
            Provider::OpenAi,
            400,
            "openai/context_length_exceeded.json",
            "This model's maximum context length is 4097 tokens",
        ),
        (
            Provider::Anthropic,
            400,
            "anthropic/prompt_too_long.json",
            "prompt is too long: 200251 tokens > 200000 maximum",
        ),
        (
            Provider::OpenAi,
            400,
            "llama.cpp/exceed_context_size.json",
            "the request exceeds the available context size",
        ),
        (
            Provider::OpenAi,
            500,
            "llama.cpp/exceed_context_size_500.json",
            "the request exceeds the available context size",
        ),
        (
            Provider::OpenAi,
            400,
            "vllm/context_overflow.json",
            "This model's maximum context length is 16384 tokens",
        ),
        (
            Provider::OpenAi,
            400,
            "ollama/prompt_too_long.json",
            "the prompt is longer than the context length",
        ),
        (
            Provider::OpenAi,
            400,
            "lmstudio/context_overflow.json",
            "the model is loaded with context length of only 32768 tokens",
        ),
    ];
    let mut wrong = Vec::new();
    for (provider, status, path, words) in cases {
        let body = recorded(path);
        // Every request gets it (the compaction's summary request too).
        let fake = FakeModel::start_refusing(
            Vec::new(),
            Arc::new(move |_: &Value| Some(Answer::Status(status, Vec::new(), body.clone()))),
        )
        .await;
        let host = Host::new();
        let ended = host
            .turn(&driver(provider, &fake.base), &prompt("hi"))
            .await;
        assert_eq!(ended, Ok(StopReason::EndTurn), "{path}");
        let events = host.take_events();
        let text = said(&events);
        let retried = thoughts(&events).contains("trying again");
        if !text.contains("no longer fits")
            || !text.contains(words)
            || text.contains("{\"")
            || retried
        {
            wrong.push(format!("{path} (retried: {retried}): {text}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// OpenAI's 429 `insufficient_quota` as a bug report quotes it: final, not retried like a rate limit, and the
/// user reads what to do.
#[tokio::test]
async fn openai_recorded_insufficient_quota_is_final() {
    let fake = FakeModel::start(vec![Answer::Status(
        429,
        Vec::new(),
        recorded("openai/insufficient_quota.json"),
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
        text.contains("no credit left") && text.contains("You exceeded your current quota"),
        "{text}"
    );
}

/// Ollama's `/v1` as its OpenAI layer streamed tool calls before it numbered them: two calls
/// whole in one delta, neither with an `index`, each with its own `call_` id; `finish_reason`
/// in a chunk of its own, then usage in a last chunk without choices (`stream_options`), then
/// `[DONE]`. Both calls run (real bash), each answered under its own id, and the usage is
/// counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_calls_without_index_in_one_delta_are_two_calls() {
    let fake = FakeModel::start(vec![
        Answer::Sse(recorded_events("ollama/tool_calls.sse")),
        openai::reply(&["Both ran."], &[]),
    ])
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("run both"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    assert_eq!(said(&events), "Checking both.Both ran.");
    assert_eq!(usages(&events).first(), Some(&(733 + 41)), "{events:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let sent = assistant(&requests[1].body, 0);
    let calls = sent["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{sent}");
    assert_eq!(calls[0]["id"], "call_k3v9x2pq");
    assert_eq!(
        calls[0]["function"]["arguments"],
        "{\"command\":\"echo ollama-first\"}"
    );
    assert_eq!(calls[1]["id"], "call_7hd0mzw1");
    let results = tool_results(&requests[1].body);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0].0, "call_k3v9x2pq");
    assert!(results[0].1.contains("ollama-first"), "{results:?}");
    assert_eq!(results[1].0, "call_7hd0mzw1");
    assert!(results[1].1.contains("ollama-second"), "{results:?}");
}

/// The tool results of a request body: each `tool` message's call id and content.
fn tool_results(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// llama.cpp's server (`llama-server --jinja`, reasoning format `deepseek`) in the shape of a
/// recorded stream: a first delta `{role, content: null}`, the thoughts as `reasoning_content`
/// pieces, a call whose first piece carries the 32-character id, the name and the start of the
/// arguments and whose other pieces carry only `index` and arguments, `finish_reason` with an
/// empty delta, then usage and `timings` in a last chunk without choices. The thoughts are
/// shown once, the call runs (real bash) and goes back under its id with its arguments whole
/// and its `reasoning_content`, and the usage is counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_cpp_reasoning_and_a_call_in_pieces_as_llama_server_streams_them() {
    const REASONING: &str =
        "The user wants to know whether the shell works. I will run echo through bash — quick.";
    const CALL: &str = "Hw3nXq8LrT5vYc2MzK9pBd4GsJ7fWa1e";
    let fake = FakeModel::start(vec![
        Answer::Sse(recorded_events("llama.cpp/tool_call.sse")),
        openai::reply(&["It works."], &[]),
    ])
    .await;
    let host = Host::new();
    let ended = host
        .turn(
            &driver(Provider::OpenAi, &fake.base),
            &prompt("does bash work?"),
        )
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    assert_eq!(thoughts(&events), REASONING);
    assert_eq!(said(&events), "It works.");
    assert_eq!(usages(&events).first(), Some(&(412 + 37)), "{events:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let sent = assistant(&requests[1].body, 0);
    let calls = sent["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{sent}");
    assert_eq!(calls[0]["id"], CALL);
    assert_eq!(
        calls[0]["function"],
        json!({"name": "bash", "arguments": "{\"command\":\"echo llama-ran\"}"})
    );
    assert_eq!(sent["reasoning_content"], REASONING);
    let results = tool_results(&requests[1].body);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].0, CALL);
    assert!(results[0].1.contains("llama-ran"), "{results:?}");
}

/// OpenRouter: an assistant message with tool calls must carry `reasoning_details` exactly as
/// the stream gave them (the pieces of one index and type joined), else the upstream provider
/// refuses the loop; OpenRouter relays that refusal as `{error: {code, message, metadata:
/// {raw, provider_name}}}` (openrouter.ai/docs/api-reference/errors), here with `raw` worded as
/// the provider words it.
fn openrouter_details(expected: Value, raw: &'static str, provider: &'static str) -> Refusal {
    Arc::new(move |body: &Value| {
        let refused = body["messages"].as_array()?.iter().any(|m| {
            m["role"] == "assistant"
                && m.get("tool_calls").is_some()
                && m["reasoning_details"] != expected
        });
        refused.then(|| {
            Answer::Status(
                400,
                Vec::new(),
                json!({"error": {"code": 400, "message": "Provider returned error",
                    "metadata": {"raw": raw, "provider_name": provider}}})
                .to_string(),
            )
        })
    })
}

/// Gemini through OpenRouter, in the shape of a recorded stream: `: OPENROUTER PROCESSING`
/// comments first, the thoughts both as `reasoning` and as `reasoning.text` details (index 0)
/// in two pieces, then a `reasoning.encrypted` detail (the thought signature, `id` = the call's
/// id) with `reasoning: null`, the call in two pieces, `finish_reason: tool_calls` beside
/// `native_finish_reason: STOP`, usage with `cost` and `cached_tokens` in a last chunk without
/// choices. The thoughts are shown once; the call runs; the next request carries the details
/// back, the text joined and the encrypted one unchanged, which the fake checks as Gemini does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openrouter_gemini_reasoning_details_go_back_joined_and_unchanged() {
    const T1: &str = "**Checking the shell**\n\nThe user asks whether bash answers. A single echo will tell.\n\n";
    const T2: &str =
        "**Choosing the command**\n\nI will call bash with an echo that names this route.\n\n";
    const DATA: &str = "ixKHqaC8YP2apHZ/bXKd3omCjEiLf5KL6i1iZbhBfJXB8P7ye/WnTJ6kFP0iotczA8EAORDrnWskEq/sG6KWGqIopec9QAnpriXMSROhjgOYL3fNxNWGPd/x6XaOwJ9Y6U0WPIFrepF9eJ1wCYuYyQkAq16PmvFtRHDFGN5gB1deWSP2sZS4a/Pc0BkDB9oN16v5GnKg245GodK5k7i78xjp0t2MSAKl7DzIgo/LxqiHONFvGSeVnjz41HYXCLKr";
    const CALL: &str = "tool_bash_Vm3KqY7xNc2RtH9wLp4B";
    let expected = json!([
        {"type": "reasoning.text", "text": format!("{T1}{T2}"), "format": "google-gemini-v1", "index": 0},
        {"type": "reasoning.encrypted", "data": DATA, "format": "google-gemini-v1", "id": CALL, "index": 0},
    ]);
    let fake = FakeModel::start_refusing(
        vec![
            Answer::Sse(recorded_events("openrouter/gemini_reasoning_details.sse")),
            openai::reply(&["Bash answered."], &[]),
        ],
        openrouter_details(
            expected.clone(),
            "Function call is missing a thought_signature in functionCall parts.",
            "Google AI Studio",
        ),
    )
    .await;
    let host = Host::new();
    let ended = host
        .turn(
            &driver(Provider::OpenAi, &fake.base),
            &prompt("does bash answer?"),
        )
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    assert_eq!(thoughts(&events), format!("{T1}{T2}"));
    assert_eq!(said(&events), "Bash answered.");
    assert_eq!(usages(&events).first(), Some(&(1311 + 96)), "{events:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "not refused: {requests:?}");
    let sent = assistant(&requests[1].body, 0);
    assert_eq!(sent["reasoning_details"], expected);
    assert!(
        sent.get("reasoning_content").is_none(),
        "not a reasoning_content server: {sent}"
    );
    assert_eq!(sent["tool_calls"][0]["id"], CALL);
    assert_eq!(
        sent["tool_calls"][0]["function"],
        json!({"name": "bash", "arguments": "{\"command\":\"echo openrouter-ran\"}"})
    );
    let results = tool_results(&requests[1].body);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].0, CALL);
    assert!(results[0].1.contains("openrouter-ran"), "{results:?}");
}

/// Claude through OpenRouter, in the shape of a recorded stream: a first chunk with an empty
/// `reasoning_details`, a detail opened with an empty `text` and an empty `signature`, text
/// pieces, the signature alone in a last piece beside `reasoning: null`, the call's arguments
/// in pieces that carry `index` and `type` but no id, and usage (with `cost`, `is_byok`,
/// `cost_details`) in a last chunk that still has a choice. The detail goes back as one item
/// with the whole text and the signature, as Anthropic checks it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openrouter_claude_signature_piece_joins_its_reasoning_detail() {
    const THINKING: &str = "The user wants to know if signed calls work. An echo through bash will show it, so I will call it.";
    const SIG: &str = "EqQDCkgIChACGAIqQAcpBashWroteThisSignatureForItsOwnTestsNotFromAnyProvider+Rk8Wm2Tq5Yx7Nc4Vb1Hj6Lp9Gs3Df0Za/Ue8Io2Ky5Mw7Rt4Qn1Xc6Bv9Pl3Hs0Jd8Fg2Ak5Wz7Ne4Ty1Qm6Vr9Lx3Ub0Oi8Sc2Gp5Dh7Jk4Mf1Yw6Zn9Rb3Xt0Ev8Cq2Ia5Ko7Lu4Hy1Pd6Sg9Nj3Wm0Tf8Gx2Ba5Qr7Vc4Zk1Yp6Le9Mh3Js0Dw8Ou2Fn5Ti7Rg4Xb1Kq6Cv9Ps3Az0Im8Uy2Hl5Ne7Wd4Sf1Qo6Gt9Bj3Vk0Ry8Lc2Zm5Ex7Ph4Ta1Nu6Ks9Jw3Dq0Fb8Mv2Yi5Og7Cn4Ul1Hr6SwGAE=";
    const CALL: &str = "toolu_vrtx_01Bq7XnR4kWm9TzYc3LpVh6E";
    let expected = json!([{"type": "reasoning.text", "text": THINKING, "signature": SIG,
                           "format": "anthropic-claude-v1", "index": 0}]);
    let fake = FakeModel::start_refusing(
        vec![
            Answer::Sse(recorded_events("openrouter/anthropic_signature.sse")),
            openai::reply(&["Signed calls work."], &[]),
        ],
        openrouter_details(
            expected.clone(),
            "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"messages.1.content.0: Invalid `signature` in `thinking` block\"}}",
            "Anthropic",
        ),
    )
    .await;
    let host = Host::new();
    let ended = host
        .turn(
            &driver(Provider::OpenAi, &fake.base),
            &prompt("do signed calls work?"),
        )
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    assert_eq!(thoughts(&events), THINKING);
    assert_eq!(said(&events), "Signed calls work.");
    assert_eq!(usages(&events).first(), Some(&(2874 + 88)), "{events:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "not refused: {requests:?}");
    let sent = assistant(&requests[1].body, 0);
    assert_eq!(sent["reasoning_details"], expected);
    assert!(
        sent.get("reasoning_content").is_none(),
        "not a reasoning_content server: {sent}"
    );
    assert_eq!(
        sent["tool_calls"][0]["function"],
        json!({"name": "bash", "arguments": "{\"command\": \"echo signed-ran\"}"})
    );
    let results = tool_results(&requests[1].body);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].0, CALL);
    assert!(results[0].1.contains("signed-ran"), "{results:?}");
}

/// OpenRouter's error after the stream began (openrouter.ai/docs/api-reference/streaming,
/// "Handling Errors During Streaming"): HTTP 200, text already sent, then a chunk with a
/// top-level `error` and `finish_reason: "error"`, and the stream ends without `[DONE]`. It
/// is a failure, not an end: retried once with the same messages (the cut reply is not kept),
/// the user reads the provider's words while it happens and that the text shown was cut off
/// (it is shown again whole), and the retry's reply is the answer.
#[tokio::test]
async fn openrouter_mid_stream_error_is_retried_and_the_cut_reply_is_not_kept() {
    let fake = FakeModel::start(vec![
        Answer::Sse(recorded_events("openrouter/mid_stream_error.sse")),
        openai::reply(&["The build failed because a file is missing."], &[]),
    ])
    .await;
    let host = Host::new();
    let ended = host
        .turn(
            &driver(Provider::OpenAi, &fake.base),
            &prompt("why did it fail?"),
        )
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    let shown = thoughts(&events);
    assert!(
        shown.contains("Provider disconnected unexpectedly")
            && shown.contains("the reply above was cut off there")
            && shown.contains("trying again"),
        "{shown}"
    );
    assert!(
        said(&events).ends_with("The build failed because a file is missing."),
        "{events:?}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[1].body["messages"], requests[0].body["messages"]);
}

/// A mid-stream error whose `code` is an HTTP status (OpenRouter's documented shape, with the
/// 402 it answers when credits run out: openrouter.ai/docs/api-reference/errors; written here,
/// not recorded) is classified by it: a 402 is final, told to the user once and never retried,
/// while the same stream with a 502 is tried again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mid_stream_error_with_a_status_code_is_final_for_4xx_and_retried_for_5xx() {
    let stream = |code: u16, message: &str| {
        let chunk = |delta: serde_json::Value, error: Option<serde_json::Value>| {
            let mut chunk = json!({"id": "gen-1765020000-Qm4Lx8", "object": "chat.completion.chunk",
                "created": 1765020000, "model": "openai/gpt-5-mini", "provider": "OpenAI",
                "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
            if let Some(error) = error {
                chunk["error"] = error;
                chunk["choices"][0]["finish_reason"] = json!("error");
            }
            format!("data: {chunk}\n\n")
        };
        vec![
            ": OPENROUTER PROCESSING\n\n".to_string(),
            chunk(json!({"role": "assistant", "content": "Checking "}), None),
            chunk(
                json!({"content": ""}),
                Some(json!({"code": code, "message": message})),
            ),
        ]
    };
    // 402: final.
    let fake = FakeModel::start(vec![
        Answer::Sse(stream(
            402,
            "Insufficient credits. Add more using https://openrouter.ai/credits",
        )),
        openai::reply(&["never asked for"], &[]),
    ])
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("check it"))
        .await;
    assert!(
        ended.is_err() || ended == Ok(StopReason::EndTurn),
        "{ended:?}"
    );
    let events = host.take_events();
    let told = format!("{}{}{:?}", thoughts(&events), said(&events), ended);
    assert!(told.contains("Insufficient credits"), "{told}");
    assert!(!told.contains("trying again"), "{told}");
    assert_eq!(fake.requests().len(), 1, "a 402 is not retried");
    // 502: retried.
    let fake = FakeModel::start(vec![
        Answer::Sse(stream(502, "Provider returned error")),
        openai::reply(&["Checked."], &[]),
    ])
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("check it"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert!(said(&host.take_events()).ends_with("Checked."));
    assert_eq!(fake.requests().len(), 2, "a 502 is tried again");
}

/// A provider's refusal as OpenRouter relays it (openrouter.ai/docs/api-reference/errors:
/// "Provider returned error", the provider's own body in `metadata.raw`): the user reads the
/// provider's words, not only OpenRouter's; a relayed context overflow (Anthropic's body as a
/// bug report quotes it) is recognised as one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openrouter_relayed_refusals_show_the_providers_words() {
    let relayed = |raw: String, provider: &str| {
        json!({"error": {"code": 400, "message": "Provider returned error",
            "metadata": {"raw": raw, "provider_name": provider}}})
        .to_string()
    };
    let gemini = json!([{"error": {"code": 400, "message": "Function call is missing a thought_signature in functionCall parts.", "status": "INVALID_ARGUMENT"}}]).to_string();
    let cases = [
        (
            relayed(gemini, "Google AI Studio"),
            "Google AI Studio: Function call is missing a thought_signature",
            false,
        ),
        (
            relayed(recorded("anthropic/prompt_too_long.json"), "Anthropic"),
            "prompt is too long: 200251 tokens > 200000 maximum",
            true,
        ),
    ];
    for (body, words, overflow) in cases {
        let fake = FakeModel::start_refusing(
            Vec::new(),
            Arc::new(move |_: &Value| Some(Answer::Status(400, Vec::new(), body.clone()))),
        )
        .await;
        let host = Host::new();
        let ended = host
            .turn(&driver(Provider::OpenAi, &fake.base), &prompt("hi"))
            .await;
        assert_eq!(ended, Ok(StopReason::EndTurn));
        let text = said(&host.take_events());
        assert!(text.contains(words), "{text}");
        assert_eq!(text.contains("no longer fits"), overflow, "{text}");
        if !overflow {
            assert_eq!(fake.requests().len(), 1, "not retried");
        }
    }
}

/// Gemini's OpenAI-compatible endpoint as bug reports quote its chunks: keys in alphabetical
/// order, each of two parallel calls whole in a chunk of its own and without `index`, only the
/// first carrying a thought signature in `extra_content`, and the end as `finish_reason: "stop"`
/// although the reply is calls. Both calls run, each answered under its own id; the first goes
/// back with its signature unchanged (Gemini refuses the loop otherwise, answered as it words
/// it) and the second gets none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_parallel_calls_without_index_ending_in_stop_keep_the_first_calls_signature() {
    const SIG: &str = "ZENfMhKHjHqfAymoYSOBNwcUwvubH31Nrs0YewBDddaQfo76Q58MG5/60Z1oC9yFEcfaXKqC8y+U9WbLQw3QNaou1k3pvWgdSEd3A4rCR8dt6wCzCBVluH+VlH6txHhQA4t4xG0ne5AtQPdb0DEU128fIF0nzWOSpqBSowVNfKI=";
    let signed: Refusal = Arc::new(|body: &Value| {
        let missing = body["messages"]
            .as_array()?
            .iter()
            .filter(|m| m["role"] == "assistant")
            .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
            .any(|call| {
                call["id"] == "q7mz2k4x"
                    && call["extra_content"]["google"]["thought_signature"] != SIG
            });
        missing.then(|| Answer::Status(400, Vec::new(), json!([{"error": {"code": 400,
            "message": "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:bash` , position 2. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
            "status": "INVALID_ARGUMENT"}}]).to_string()))
    });
    let fake = FakeModel::start_refusing(
        vec![
            Answer::Sse(recorded_events("gemini/parallel_calls.sse")),
            openai::reply(&["Both ran."], &[]),
        ],
        signed,
    )
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("run both"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    assert_eq!(said(&events), "Both ran.");
    assert_eq!(usages(&events).first(), Some(&(1204 + 58)), "{events:?}");
    let calls: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::Call(_)))
        .collect();
    assert_eq!(
        calls,
        [
            &Event::Call("echo gemini-first".into()),
            &Event::Call("echo gemini-second".into())
        ]
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "not refused: {requests:?}");
    let sent = assistant(&requests[1].body, 0);
    let calls = sent["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{sent}");
    assert_eq!(calls[0]["id"], "q7mz2k4x");
    assert_eq!(
        calls[0]["extra_content"],
        json!({"google": {"thought_signature": SIG}})
    );
    assert_eq!(
        calls[0]["function"]["arguments"],
        "{\"command\":\"echo gemini-first\"}"
    );
    assert_eq!(calls[1]["id"], "w3hn8c1v");
    assert_eq!(calls[1].get("extra_content"), None, "{sent}");
    let results = tool_results(&requests[1].body);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0].0, "q7mz2k4x");
    assert!(results[0].1.contains("gemini-first"), "{results:?}");
    assert_eq!(results[1].0, "w3hn8c1v");
    assert!(results[1].1.contains("gemini-second"), "{results:?}");
}

/// LM Studio's `/v1/chat/completions` stream as a bug report quotes it: `system_fingerprint`
/// the model's name, `role` in every delta, `logprobs: null`, the end in a chunk with an empty
/// delta, `[DONE]`, and no usage at all (that version ignored `stream_options`). The text is
/// shown once and no usage is made up: the client gets no `usage_update` rather than a zero.
#[tokio::test]
async fn lm_studio_stream_without_usage_reports_none() {
    let fake = FakeModel::start(vec![Answer::Sse(recorded_events("lmstudio/no_usage.sse"))]).await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("hi"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    assert_eq!(said(&events), "Ready. What shall I look at?");
    assert_eq!(usages(&events), Vec::<u64>::new(), "{events:?}");
    assert_eq!(fake.requests().len(), 1);
}

/// Gemini's OpenAI-compatible endpoint with thought summaries asked for, in the shape of
/// chunks captured from it (each thought piece is `content` flagged
/// `extra_content.google.thought`, the first opening with `<thought>`, the answer's first piece
/// starting with `</thought>` beside `extra_content: null`; the signature of a text reply in
/// the last chunk's delta beside `content: null`). Step one thinks and calls, step two thinks
/// and answers. The thoughts are shown once, as thoughts, and never as the reply's text nor
/// sent back; the call goes back with its signature; on the next turn the text reply goes back
/// with its own signature on the message; a session that switches model sends neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_thought_summaries_are_thoughts_and_a_text_replys_signature_goes_back() {
    const THOUGHT_1: &str = "**Checking the shell**\n\nThe user wants the kernel's name. `uname -s` through bash will say it.";
    const THOUGHT_2: &str = "**Reading the output**\n\nBash printed the marker, so the command ran. I will say so plainly.";
    const ANSWER: &str = "The command ran: bash printed its marker.";
    const CALL_SIG: &str = "YWNwLWJhc2ggZ2VtaW5pIGNhbGwgc2lnbmF0dXJlLCB3cml0dGVuIGZvciBpdHMgdGVzdHMgeHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6ChoqOkpaanqKk=";
    const TEXT_SIG: &str = "YWNwLWJhc2ggZ2VtaW5pIHRleHQgc2lnbmF0dXJlLCB3cml0dGVuIGZvciBpdHMgdGVzdHMgyMnKy8zNzs/Q0dLT1NXW19jZ2tvc3d7f4OHi4+Tl5ufo6err7O3u7/Dx8vP09fb3+Pk=";
    let fake = FakeModel::start(vec![
        Answer::Sse(recorded_events("gemini/thoughts_then_call.sse")),
        Answer::Sse(recorded_events("gemini/thought_summary_text.sse")),
        openai::reply(&["Again."], &[]),
        openai::reply(&["From the other model."], &[]),
    ])
    .await;
    let mut other = config(Provider::OpenAi, &fake.base);
    other.model = "other".into();
    let driver = ModelDriver::new(config(Provider::OpenAi, &fake.base)).with_model(other);
    let host = Host::new();
    let gemini = Some("openai:fake-model");
    let ended = host
        .turn_choosing(&driver, &prompt("which kernel?"), gemini, Some("high"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let events = host.take_events();
    assert_eq!(thoughts(&events), format!("{THOUGHT_1}{THOUGHT_2}"));
    assert_eq!(said(&events), ANSWER);
    assert_eq!(usages(&events).first(), Some(&(1187 + 41)), "{events:?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    let step = assistant(&requests[1].body, 0);
    assert_eq!(step["content"], Value::Null, "{step}");
    assert_eq!(
        step["tool_calls"][0]["extra_content"],
        json!({"google": {"thought_signature": CALL_SIG}})
    );
    assert!(step.get("extra_content").is_none(), "{step}");
    assert!(step.get("reasoning_content").is_none(), "{step}");
    let results = tool_results(&requests[1].body);
    assert_eq!(results[0].0, "k2v9x7qd");
    assert!(results[0].1.contains("gemini-thought-ran"), "{results:?}");
    // The next turn on the same model: the text reply with its signature, no thoughts.
    host.turn_choosing(&driver, &prompt("and now?"), gemini, Some("high"))
        .await
        .unwrap();
    let requests = fake.requests();
    let replied = assistant(&requests[2].body, 1);
    assert_eq!(replied["content"], ANSWER, "{replied}");
    assert_eq!(
        replied["extra_content"],
        json!({"google": {"thought_signature": TEXT_SIG}})
    );
    let sent = requests[2].body.to_string();
    assert!(
        !sent.contains("Checking the shell")
            && !sent.contains("Reading the output")
            && !sent.contains("thought>"),
        "{sent}"
    );
    // Another model: neither signature, no thoughts.
    host.turn_choosing(&driver, &prompt("other?"), Some("openai:other"), None)
        .await
        .unwrap();
    let requests = fake.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    let sent = requests[3].body.to_string();
    assert!(
        !sent.contains(CALL_SIG)
            && !sent.contains(TEXT_SIG)
            && !sent.contains("extra_content")
            && !sent.contains("Reading the output"),
        "{sent}"
    );
    assert!(sent.contains(ANSWER), "the reply's text stays: {sent}");
}

/// llama.cpp's cached tokens: its `timings.cache_n` (398 of the 412 prompt tokens, the other
/// `prompt_n` 14 evaluated) is shown as cached tokens in the usage, where the usage gives no
/// `prompt_tokens_details.cached_tokens` (builds before it); and a stream without usage (not
/// asked with `stream_options`, as after a gateway refused it) is counted from the timings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_cpp_timings_show_its_cached_tokens() {
    // The recorded shape without its usage: the timings are the only count.
    let without_usage: Vec<String> = recorded_events("llama.cpp/tool_call.sse")
        .into_iter()
        .map(|event| match event.strip_prefix("data: ") {
            Some(data) if data.contains("\"timings\"") => {
                let mut chunk: Value = serde_json::from_str(data.trim()).unwrap();
                chunk.as_object_mut().unwrap().remove("usage");
                format!("data: {chunk}\n\n")
            }
            _ => event,
        })
        .collect();
    let fake = FakeModel::start(vec![
        Answer::Sse(recorded_events("llama.cpp/tool_call.sse")),
        openai::reply(&["It works."], &[]),
        Answer::Sse(without_usage),
        openai::reply(&["Again."], &[]),
    ])
    .await;
    let host = Host::new();
    let driver = driver(Provider::OpenAi, &fake.base);
    for _ in 0..2 {
        host.turn(&driver, &prompt("does bash work?"))
            .await
            .unwrap();
        let events = host.take_events();
        let at = events
            .iter()
            .position(|e| matches!(e, Event::Usage(449, _)))
            .unwrap_or_else(|| panic!("no usage of 449 tokens: {events:?}"));
        assert_eq!(
            events.get(at + 1),
            Some(&Event::Cached(398, 0)),
            "{events:?}"
        );
    }
}

/// OpenRouter's error after the stream began, with the `metadata` its error documentation
/// gives a provider's error (openrouter.ai/docs/api-reference/errors: `provider_name` and the
/// provider's own `raw` words; written here, not recorded): the user reads which provider failed
/// and its words, not only OpenRouter's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openrouter_mid_stream_error_names_the_provider_and_its_words() {
    let chunk = |delta: Value, error: Option<Value>| {
        let mut chunk = json!({"id": "gen-1765021000-Hq2Vz7", "object": "chat.completion.chunk",
            "created": 1765021000, "model": "google/gemini-3-pro-preview", "provider": "Google AI Studio",
            "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
        if let Some(error) = error {
            chunk["error"] = error;
            chunk["choices"][0]["finish_reason"] = json!("error");
        }
        format!("data: {chunk}\n\n")
    };
    let stream = vec![
        ": OPENROUTER PROCESSING\n\n".to_string(),
        chunk(json!({"role": "assistant", "content": "Looking "}), None),
        chunk(
            json!({"content": ""}),
            Some(json!({"code": 502, "message": "Provider returned error",
                "metadata": {"provider_name": "Google AI Studio",
                    "raw": "{\"error\":{\"code\":503,\"message\":\"The model is overloaded. Please try again later.\",\"status\":\"UNAVAILABLE\"}}"}})),
        ),
    ];
    let fake = FakeModel::start(vec![
        Answer::Sse(stream),
        openai::reply(&["Found it."], &[]),
    ])
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("look"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let shown = thoughts(&host.take_events());
    assert!(
        shown.contains("Provider returned error (Google AI Studio: The model is overloaded. Please try again later.)"),
        "{shown}"
    );
    assert_eq!(fake.requests().len(), 2);
}
