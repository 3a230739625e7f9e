//! The model driver's ACP surface through the BUILT BINARY, against the fake provider: cost in
//! `usage_update` where the provider reports one (and none where it does not), thinking as
//! `agent_thought_chunk` for both providers, `promptCapabilities.embeddedContext` and embedded
//! resources reaching the model, `$/cancel_request` stopping the stream like `session/cancel`,
//! `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` and `--base-url` with each form's rule.

use acp_bash::acp::client::{AcpClient, ClientProfile};
use agent_client_protocol::v1::schema::{
    ContentBlock, EmbeddedResource, EmbeddedResourceResource, PromptRequest, ResourceLink,
    SessionUpdate, StopReason, TextResourceContents,
};

use super::harness::{served, KEY};
use crate::support::acp::*;
use crate::support::fake_model::{anthropic, openai, Answer, FakeModel};

/// The binary with `--model MODEL` and the key in its variable, plus `args`, plus `env`.
fn agent(model: &str, args: &[&str], env: &[(&str, &str)]) -> AcpClient {
    served(model, args, env)
}

fn thoughts(updates: &[SessionUpdate]) -> String {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentThoughtChunk(chunk) => match &chunk.content {
                ContentBlock::Text(text) => Some(text.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// OpenRouter-style `usage.cost`: each `usage_update` carries the session's cost so far, in
/// USD, summed over replies and turns; a provider that reports none (Anthropic) gets none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_updates_carry_the_cost_where_the_provider_reports_it() {
    let with_cost = |answer: Answer, cost: &str| match answer {
        Answer::Sse(events) => Answer::Sse(
            events
                .into_iter()
                .map(|e| {
                    e.replace(
                        "\"total_tokens\":120}",
                        &format!("\"total_tokens\":120,\"cost\":{cost}}}"),
                    )
                })
                .collect(),
        ),
        other => other,
    };
    let fake = FakeModel::start(vec![
        with_cost(
            openai::reply(&[], &[("call_1", "bash", &["{\"command\": \"true\"}"])]),
            "0.25",
        ),
        with_cost(openai::reply(&["Done."], &[]), "0.5"),
        with_cost(openai::reply(&["Again."], &[]), "1.25"),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    let base = format!("{}/v1", fake.base);
    let client = agent("openai:fake", &["--base-url", &base], &[]);
    let ((first, second), _) = converse_with(client, "cost", async |mut c| {
        let session = c.new_session(&dir).await?;
        let first = c.prompt(&session, "one").await?;
        let second = c.prompt(&session, "two").await?;
        Ok((first.updates, second.updates))
    })
    .await;
    let costs = |updates: &[SessionUpdate]| -> Vec<(u64, Option<f64>, Option<String>)> {
        updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::UsageUpdate(usage) => Some((
                    usage.used,
                    usage.cost.as_ref().map(|c| c.amount),
                    usage.cost.as_ref().map(|c| c.currency.clone()),
                )),
                _ => None,
            })
            .collect()
    };
    let usd = Some("USD".to_string());
    assert_eq!(
        costs(&first),
        [
            (120, Some(0.25), usd.clone()),
            (120, Some(0.75), usd.clone())
        ]
    );
    assert_eq!(costs(&second), [(120, Some(2.0), usd)]);

    let fake = FakeModel::start(vec![anthropic::reply(&["Hi."], &[])]).await;
    let client = agent("anthropic:fake", &["--base-url", &fake.base], &[]);
    let (updates, _) = converse_with(client, "no cost", async |mut c| {
        let session = c.new_session(&dir).await?;
        Ok(c.prompt(&session, "one").await?.updates)
    })
    .await;
    let reported = costs(&updates);
    assert_eq!(reported.len(), 1);
    assert_eq!(reported[0].1, None);
}

/// Reasoning (OpenAI-compatible `reasoning_content`) and thinking (Anthropic's
/// `thinking_delta`) reach the client as `agent_thought_chunk`, before the message, and never
/// as the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_reaches_the_wire_as_thought_chunks_for_both_providers() {
    let (_tmp, dir) = temp_dir();
    let fake = FakeModel::start(vec![Answer::Sse(openai::events(
        &["Weigh ", "it."],
        &["Answer."],
        &[],
    ))])
    .await;
    let base = format!("{}/v1", fake.base);
    let client = agent("openai:fake", &["--base-url", &base], &[]);
    let (openai_updates, _) = converse_with(client, "openai thoughts", async |mut c| {
        let session = c.new_session(&dir).await?;
        Ok(c.prompt(&session, "think").await?.updates)
    })
    .await;
    let fake = FakeModel::start(vec![Answer::Sse(anthropic::events(
        &["Consider ", "this."],
        &["Answer."],
        &[],
    ))])
    .await;
    let client = agent("anthropic:fake", &["--base-url", &fake.base], &[]);
    let (anthropic_updates, _) = converse_with(client, "anthropic thoughts", async |mut c| {
        let session = c.new_session(&dir).await?;
        Ok(c.prompt(&session, "think").await?.updates)
    })
    .await;
    for (updates, thought) in [
        (&openai_updates, "Weigh it."),
        (&anthropic_updates, "Consider this."),
    ] {
        assert_eq!(thoughts(updates), thought);
        let first_thought = updates
            .iter()
            .position(|u| matches!(u, SessionUpdate::AgentThoughtChunk(_)))
            .unwrap();
        let first_message = updates
            .iter()
            .position(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .unwrap();
        assert!(first_thought < first_message, "{updates:?}");
    }
}

/// With `--model` the agent advertises `embeddedContext` (without, it does not): an embedded
/// resource's text and a resource link reach the model's request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_resources_reach_the_model_and_the_capability_says_so() {
    let (_tmp, dir) = temp_dir();
    let fake = FakeModel::start(vec![openai::reply(&["Read it."], &[])]).await;
    let base = format!("{}/v1", fake.base);
    let client = agent("openai:fake", &["--base-url", &base], &[]);
    let ((embedded, stop), _) = converse_with(client, "embedded resource", async |c| {
        let embedded = c
            .init
            .agent_capabilities
            .prompt_capabilities
            .embedded_context;
        let mut c = c;
        let session = c.new_session(&dir).await?;
        let blocks = vec![
            ContentBlock::from("explain this file"),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn planted_marker_7c1() {}",
                    "file:///w/src/lib.rs",
                )),
            )),
            ContentBlock::ResourceLink(ResourceLink::new("notes.md", "file:///w/notes.md")),
        ];
        let response = c
            .connection()
            .send_request(PromptRequest::new(session, blocks))
            .block_task()
            .await?;
        Ok((embedded, response.stop_reason))
    })
    .await;
    assert!(embedded);
    assert_eq!(stop, StopReason::EndTurn);
    let user = fake.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    for part in [
        "explain this file",
        "fn planted_marker_7c1() {}",
        "file:///w/src/lib.rs",
        "file:///w/notes.md",
    ] {
        assert!(user.contains(part), "{part:?} not sent: {user}");
    }
    let shell = AcpClient::new(binary(), ["serve", "--no-history"]).profile(ClientProfile::Zed);
    let (embedded, _) = converse_with(shell, "shell capabilities", async |c| {
        Ok(c.init
            .agent_capabilities
            .prompt_capabilities
            .embedded_context)
    })
    .await;
    assert!(!embedded, "the shell driver reads no embedded context");
}

/// JSON-RPC's `$/cancel_request` for a model prompt stops the stream at once (the fake sees
/// the connection go) and the prompt is answered `cancelled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_request_stops_the_models_stream() {
    let mut events = openai::events(&[], &["Streaming"], &[]);
    events.truncate(2);
    let fake = FakeModel::start(vec![Answer::Hang(events)]).await;
    let (_tmp, dir) = temp_dir();
    let base = format!("{}/v1", fake.base);
    let client = agent("openai:fake", &["--base-url", &base], &[]);
    let transcript = client.transcript();
    converse_with(client, "$/cancel_request a model turn", async |mut c| {
        let session = c.new_session(&dir).await?;
        let pending = c.start_prompt(&session, "go");
        loop {
            let update = c.next_update().await.expect("an update");
            if matches!(update.update, SessionUpdate::AgentMessageChunk(_)) {
                break;
            }
        }
        pending.cancel()?;
        fake.client_left().await;
        // The SDK drops the answer to a request it cancelled; wait until it crossed the pipe
        // (a poll on the transcript: no event marks the line; `converse` is the hang guard).
        while !transcript
            .lines()
            .iter()
            .any(|l| l.starts_with("<- ") && l.contains("stopReason"))
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        Ok(())
    })
    .await;
    let lines = transcript.lines();
    assert!(lines
        .iter()
        .any(|l| l.starts_with("-> ") && l.contains("$/cancel_request")));
    let answer = lines
        .iter()
        .find(|l| l.starts_with("<- ") && l.contains("stopReason"))
        .unwrap();
    assert!(answer.contains("\"cancelled\""), "{answer}");
    assert_eq!(fake.requests().len(), 1);
}

/// `ANTHROPIC_BASE_URL` (without `/v1`: requests go to `{base}/v1/messages`) and
/// `OPENAI_BASE_URL` (with `/v1`: `{base}/chat/completions`) are honoured, and `--base-url`
/// wins over either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn base_url_variables_are_honoured_in_each_providers_form_and_the_flag_wins() {
    let (_tmp, dir) = temp_dir();
    let run = async |client: AcpClient| {
        let dir = dir.clone();
        converse_with(client, "base url", async move |mut c| {
            let session = c.new_session(&dir).await?;
            Ok(c.prompt(&session, "hi").await?.stop_reason)
        })
        .await
        .0
    };
    // Anthropic's form: no /v1 in the base.
    let fake = FakeModel::start(vec![anthropic::reply(&["Env."], &[])]).await;
    let stop = run(agent(
        "anthropic:fake",
        &[],
        &[("ANTHROPIC_BASE_URL", &format!("{}/", fake.base))],
    ))
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(fake.requests()[0].path, "/v1/messages");
    assert_eq!(fake.requests()[0].header("x-api-key"), Some(KEY));
    // OpenAI's form: the base holds /v1 (a gateway's prefix is kept too).
    let fake = FakeModel::start(vec![openai::reply(&["Env."], &[])]).await;
    let stop = run(agent(
        "openai:fake",
        &[],
        &[("OPENAI_BASE_URL", &format!("{}/gateway/v1", fake.base))],
    ))
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(fake.requests()[0].path, "/gateway/v1/chat/completions");
    // The flag wins over the variable (which points at nothing listening).
    let fake = FakeModel::start(vec![anthropic::reply(&["Flag."], &[])]).await;
    let stop = run(agent(
        "anthropic:fake",
        &["--base-url", &fake.base],
        &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")],
    ))
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(fake.requests()[0].path, "/v1/messages");
}

/// No HTTP work before it is needed: without `--model` no HTTP client is ever built (a prompt
/// runs as a script); with `--model` it is built on the first model request, not at start-up
/// nor for a session. The trace line is the client's only construction site (`client.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_client_is_built_on_the_first_model_request_only() {
    const BUILT: &str = "building the HTTP client";
    let (_tmp, dir) = temp_dir();
    let shell = AcpClient::new(
        binary(),
        ["serve", "--no-history", "--log-level", "acp_bash=debug"],
    )
    .profile(ClientProfile::Zed);
    let (_, transcript) = converse_with(shell, "no model", async |mut c| {
        let session = c.new_session(&dir).await?;
        c.prompt(&session, "echo hi").await
    })
    .await;
    let stderr = transcript.stderr().join("\n");
    assert!(
        stderr.contains("initialize"),
        "no debug log at all: {stderr}"
    );
    assert!(!stderr.contains(BUILT), "{stderr}");

    let fake = FakeModel::start(vec![openai::reply(&["Hi."], &[])]).await;
    let base = format!("{}/v1", fake.base);
    let client = agent("openai:fake", &["--base-url", &base], &[]);
    let transcript = client.transcript();
    let (before, _) = converse_with(client, "model", async |mut c| {
        let session = c.new_session(&dir).await?;
        let before = transcript.stderr().join("\n");
        c.prompt(&session, "hi").await?;
        Ok(before)
    })
    .await;
    assert!(!before.contains(BUILT), "{before}");
    let after = transcript.stderr().join("\n");
    assert_eq!(after.matches(BUILT).count(), 1, "{after}");
}
