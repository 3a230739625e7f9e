//! `examples/embed_agent.rs`, a whole ACP agent built on the library with a scripted model, run
//! over real pipes with the real SDK, for a card client and for a plain client.

use std::path::PathBuf;
use std::sync::OnceLock;

use acp_bash::acp::client::{AcpClient, ClientProfile};
use agent_client_protocol::v1::schema::{SessionUpdate, StopReason};

use crate::support::acp::*;

/// The example's binary: `target/<profile>/examples/embed_agent`, next to this test's own
/// `deps/` directory. `cargo test` builds it; `cargo test --test it` does not, so it is built
/// here once when missing.
fn example() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().unwrap();
            let profile_dir = exe.parent().unwrap().parent().unwrap();
            let path = profile_dir.join("examples").join("embed_agent");
            let built = std::process::Command::new(env!("CARGO"))
                .args(["build", "--quiet", "--example", "embed_agent"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("cargo runs");
            assert!(built.success(), "cargo build --example embed_agent failed");
            assert!(path.is_file(), "no example binary at {}", path.display());
            path
        })
        .clone()
}

/// One prompt to the example: the model's two bash calls, then its answer.
async fn one_prompt(profile: ClientProfile) -> Vec<SessionUpdate> {
    let (_tmp, dir) = temp_dir();
    std::fs::write(dir.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    let client = AcpClient::new(example(), Vec::<String>::new()).profile(profile);
    let transcript = client.transcript();
    let turn = guard(
        "the example agent",
        client.run(async |mut c: acp_bash::acp::client::Conversation| {
            let session = c.new_session(&dir).await?;
            // Two actions, so a terminal card: a lone `cat a.txt` would be shown as a read
            // (the model driver's calls are classified, `src/classify/`).
            c.prompt(&session, "cat a.txt && true").await
        }),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:?}\n{}", transcript.stderr().join("\n")));
    validate_wire(&transcript.lines());
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    turn.updates
}

fn calls(updates: &[SessionUpdate]) -> Vec<String> {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCall(call) => Some(call.title.clone()),
            _ => None,
        })
        .collect()
}

fn answer(updates: &[SessionUpdate]) -> String {
    let json = serde_json::to_value(updates.last().unwrap()).unwrap();
    assert_eq!(json["sessionUpdate"], "agent_message_chunk", "{json}");
    json["content"]["text"].as_str().unwrap().to_string()
}

/// The scripted model's two calls: the prompt, then one that counts the first one's lines.
fn assert_the_two_scripted_calls(updates: &[SessionUpdate]) {
    let calls = calls(updates);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0], "cat a.txt && true");
    // 3 lines, plus any notice the sandbox gives on this machine.
    assert!(
        calls[1].starts_with("echo the first call printed "),
        "{calls:?}"
    );
}

#[tokio::test]
async fn the_example_agent_shows_its_calls_as_cards_to_a_card_client() {
    let updates = one_prompt(ClientProfile::Zed).await;
    assert_the_two_scripted_calls(&updates);
    let output = card_output(&updates);
    assert!(output.contains("one\ntwo\nthree\n"), "{output}");
    assert!(output.contains("the first call printed "), "{output}");
    let exits: Vec<_> = tool_call_updates(&updates)
        .into_iter()
        .filter_map(terminal_exit)
        .collect();
    assert_eq!(exits.len(), 2, "{exits:?}");
    assert!(exits.iter().all(|exit| exit["exit_code"] == 0), "{exits:?}");
    assert_eq!(answer(&updates), "Done: [exit code: 0]");
}

#[tokio::test]
async fn the_example_agent_shows_console_blocks_to_a_plain_client() {
    let updates = one_prompt(ClientProfile::Plain).await;
    assert_the_two_scripted_calls(&updates);
    let wire = serde_json::to_string(&updates).unwrap();
    assert!(!wire.contains("terminal"), "{wire}");
    assert!(
        wire.contains("one\\ntwo\\nthree\\n[exit code: 0]\\n```"),
        "{wire}"
    );
    assert_eq!(answer(&updates), "Done: [exit code: 0]");
}

/// The README's embedding snippet is, line for line, the visible part of a doctest of the `acp`
/// module (which `cargo test --doc` compiles): what the README shows compiles against the
/// library as it is, and stays "a dozen lines".
#[test]
fn the_readme_snippet_is_a_compiled_doctest() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = &readme[readme.find("## Embedding it in your own agent").unwrap()..];
    let start = section.find("```rust\n").expect("a rust block") + "```rust\n".len();
    let snippet: Vec<&str> = section[start..]
        .lines()
        .take_while(|line| *line != "```")
        .collect();

    let source = std::fs::read_to_string(root.join("src/acp/mod.rs")).unwrap();
    let docs: Vec<&str> = source
        .lines()
        .filter_map(|line| line.strip_prefix("//!"))
        .map(|line| line.strip_prefix(' ').unwrap_or(line))
        .collect();
    let marker = docs
        .iter()
        .position(|line| line.contains("the README's snippet"))
        .expect("the acp module docs name the README's snippet");
    let doctest: Vec<&str> = docs[marker..]
        .iter()
        .skip_while(|line| !line.starts_with("```"))
        .skip(1)
        .take_while(|line| !line.starts_with("```"))
        .filter(|line| !line.starts_with("# ") && **line != "#")
        .copied()
        .collect();
    assert_eq!(snippet, doctest, "README.md and src/acp/mod.rs disagree");
    assert!(snippet.len() <= 12, "{} lines", snippet.len());
}
