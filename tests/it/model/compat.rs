//! "Any OpenAI-compatible server", through the built binary against the fake provider:
//! `--header NAME=VALUE` and `--extra-body JSON` on every request (and never a header's value
//! in the log), the base URL's credentials never logged.

use acp_bash::acp::client::AcpClient;
use agent_client_protocol::v1::schema::StopReason;

use super::harness::{served, KEY};
use crate::support::acp::*;
use crate::support::fake_model::{anthropic, openai, FakeModel};

fn agent(model: &str, args: &[&str]) -> AcpClient {
    served(model, args, &[])
}

/// `--header` (twice) and `--extra-body` reach each request of both providers: the headers as
/// given, the body's objects merged key by key (Ollama's `options.num_ctx` beside the
/// request's own fields); the header's value and the URL's credentials are not in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_and_extra_body_reach_every_request_and_never_the_log() {
    let (_tmp, dir) = temp_dir();
    let fake = FakeModel::start(vec![
        openai::reply(&[], &[("c1", "bash", &[r#"{"command":"true"}"#])]),
        openai::reply(&["Done."], &[]),
    ])
    .await;
    // Credentials in the URL (the fake ignores them): never in the log.
    let base = fake.base.replace("http://", "http://user:url-s3cret@") + "/v1?key=query-s3cret";
    let extra = r#"{"options":{"num_ctx":32768},"stream_options":{"extra":true}}"#;
    let client = agent(
        "openai:fake",
        &[
            "--base-url",
            &base,
            "--header",
            "X-Title=acp-bash tests",
            "--header",
            "X-Gateway-Token: header-s3cret",
            "--extra-body",
            extra,
        ],
    );
    let (stop, transcript) = converse_with(client, "extras", async |mut c| {
        let session = c.new_session(&dir).await?;
        Ok(c.prompt(&session, "hi").await?.stop_reason)
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for request in &requests {
        assert_eq!(request.header("x-title"), Some("acp-bash tests"));
        assert_eq!(request.header("x-gateway-token"), Some("header-s3cret"));
        assert_eq!(request.body["options"]["num_ctx"], 32768);
        // Merged into the request's own object, not replacing it.
        assert_eq!(request.body["stream_options"]["include_usage"], true);
        assert_eq!(request.body["stream_options"]["extra"], true);
        assert_eq!(request.body["model"], "fake");
        // The path before the base URL's query, which is sent as given.
        assert_eq!(request.path, "/v1/chat/completions?key=query-s3cret");
    }
    let log = transcript.stderr().join("\n");
    assert!(log.contains("X-Gateway-Token"), "the log names the header");
    for secret in ["header-s3cret", "url-s3cret", "query-s3cret", KEY] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
    // Anthropic's body takes them the same way.
    let fake = FakeModel::start(vec![anthropic::reply(&["Hi."], &[])]).await;
    let base = fake.base.replace("http://", "http://user:url-s3cret@") + "?key=query-s3cret";
    let client = agent(
        "anthropic:fake",
        &[
            "--base-url",
            &base,
            "--header",
            "anthropic-beta=context-1m-2025-08-07",
            "--extra-body",
            r#"{"metadata":{"user_id":"u1"}}"#,
        ],
    );
    let (stop, transcript) = converse_with(client, "extras anthropic", async |mut c| {
        let session = c.new_session(&dir).await?;
        Ok(c.prompt(&session, "hi").await?.stop_reason)
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let request = &fake.requests()[0];
    assert_eq!(
        request.header("anthropic-beta"),
        Some("context-1m-2025-08-07")
    );
    assert_eq!(request.body["metadata"]["user_id"], "u1");
    assert_eq!(request.body["model"], "fake");
    assert_eq!(request.path, "/v1/messages?key=query-s3cret");
    let log = transcript.stderr().join("\n");
    for secret in ["url-s3cret", "query-s3cret"] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
}

/// Bad flags are refused at start with what to write.
#[test]
fn bad_headers_and_bodies_are_refused_with_what_to_write() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(binary())
            .args(["serve", "--model", "openai:fake"])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    assert!(run(&["--header", "novalue"]).contains("NAME=VALUE"));
    assert!(run(&["--header", "Authorization=Bearer x"]).contains("--api-key-env"));
    assert!(run(&["--extra-body", "[1]"]).contains("JSON object"));
    assert!(run(&["--extra-body", r#"{"messages":[]}"#]).contains("may not set"));
}
