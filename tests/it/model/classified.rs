//! A model's read, search and listing through the BUILT BINARY (`serve --model`, over pipes,
//! against the fake provider): snapshot transcripts for Zed (the card client) and a plain
//! client. Each call is of its kind, titled, with its locations, no card; its output is text on
//! its final update; the model reads the same result as for any command.

use acp_bash::acp::client::{AcpClient, ClientProfile};
use agent_client_protocol::v1::schema::{SessionUpdate, StopReason, ToolKind};

use super::harness::KEY;
use crate::support::acp::*;
use crate::support::fake_model::{openai, FakeModel};

fn model_client(profile: ClientProfile, base: &str) -> AcpClient {
    let args = [
        "serve",
        "--sandbox",
        "full",
        "--no-history",
        "--model",
        "openai:fake-model",
        "--base-url",
        base,
    ];
    AcpClient::new(binary(), args)
        .profile(profile)
        .env("XDG_CONFIG_HOME", "/nonexistent/acp-bash-tests")
        .env("OPENAI_API_KEY", KEY)
}

async fn classified_transcript(profile: ClientProfile, name: &str) {
    let fake = FakeModel::start(vec![
        openai::reply(
            &[],
            &[
                ("c1", "bash", &[r#"{"command": "sed -n '2,3p' notes.txt"}"#]),
                ("c2", "bash", &[r#"{"command": "grep -rn needle src"}"#]),
                ("c3", "bash", &[r#"{"command": "cd src && ls"}"#]),
                ("c4", "bash", &[r#"{"command": "echo done"}"#]),
            ],
        ),
        openai::reply(&["Read, searched, listed."], &[]),
    ])
    .await;
    let (_tmp, dir) = temp_dir();
    std::fs::write(dir.join("notes.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    std::fs::create_dir(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/a.rs"), "// a needle\n").unwrap();
    let base = format!("{}/v1", fake.base);
    let (turn, transcript) = converse_with(model_client(profile, &base), name, async |mut c| {
        let session = c.new_session(&dir).await?;
        c.prompt(&session, "look around").await
    })
    .await;
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    let calls: Vec<_> = turn
        .updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCall(call) => Some(call),
            _ => None,
        })
        .collect();
    let shown: Vec<_> = calls
        .iter()
        .map(|c| (c.kind, c.title.as_str(), c.locations.len()))
        .collect();
    assert_eq!(
        shown,
        [
            (ToolKind::Read, "Read notes.txt", 1),
            (ToolKind::Search, "Search 'needle' in src", 1),
            (ToolKind::Read, "List src", 1),
            (ToolKind::Execute, "echo done", 0),
        ]
    );
    assert_eq!(calls[0].locations[0].path, dir.join("notes.txt"));
    assert_eq!(calls[0].locations[0].line, Some(2));
    // The model read each result as it reads any command's.
    let messages = &fake.requests()[1].body["messages"];
    assert_eq!(messages[3]["content"], "two\nthree\n[exit code: 0]");
    assert_eq!(
        messages[4]["content"],
        "src/a.rs:1:// a needle\n[exit code: 0]"
    );
    assert_eq!(messages[5]["content"], "a.rs\n[exit code: 0]");
    let normalized = normalize_transcript(&transcript.lines(), &dir);
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(name, normalized.join("\n"));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zed_classified_calls() {
    classified_transcript(ClientProfile::Zed, "zed__classified_calls").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_classified_calls() {
    classified_transcript(ClientProfile::Plain, "plain__classified_calls").await;
}
