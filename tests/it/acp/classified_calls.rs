//! A model's reads and searches shown as such (`acp_bash::classify`), display only: through the
//! real runner on real bash, a classified call runs the same script as the terminal card it
//! replaces (the same output, status and `rawInput`), and the file it names is the file bash
//! opened, whatever the name and however it is quoted.

use std::path::Path;

use acp_bash::acp::bridge::ClientFeatures;
use acp_bash::acp::ToolCallRunner;
use acp_bash::exec::Session;
use acp_bash::tool::{BashCall, BashResult};
use agent_client_protocol::v1::schema::{SessionUpdate, ToolCallId, ToolKind};
use proptest::prelude::*;
use tokio_util::sync::CancellationToken;

use crate::support::engine::full_session;

/// Runs `call` through the runner for a client with `features`; its updates and result.
fn run(
    session: &Session,
    call: &BashCall,
    features: ClientFeatures,
) -> (Vec<SessionUpdate>, BashResult) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut updates = Vec::new();
        let mut sink = |update: SessionUpdate| updates.push(update);
        let result = ToolCallRunner::new(features)
            .run(
                session,
                &ToolCallId::new("call-1"),
                call,
                &mut sink,
                &CancellationToken::new(),
            )
            .await;
        (updates, result)
    })
}

/// A name bash would pass through as it is written, in one of three quotings.
fn quoted(name: &str, style: u8) -> String {
    match style {
        0 => format!("'{}'", name.replace('\'', "'\\''")),
        1 => {
            let mut out = String::from("\"");
            for c in name.chars() {
                if matches!(c, '$' | '`' | '"' | '\\') {
                    out.push('\\');
                }
                out.push(c);
            }
            out.push('"');
            out
        }
        _ => name
            .chars()
            .map(|c| match c {
                c if c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '/') => c.to_string(),
                '\n' => "'\n'".to_string(),
                c => format!("\\{c}"),
            })
            .collect(),
    }
}

fn name() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "a",
        "b.rs",
        " ",
        "'",
        "\"",
        "\\",
        "$HOME",
        "`id`",
        "*",
        "?",
        "[x]",
        "{a,b}",
        "~",
        "é",
        "日本",
        "\n",
        "\t",
        "\u{1b}[31m",
        ";",
        "&",
        "|",
        "(",
        ")",
        "<",
        ">",
        "#",
        "!",
        "=",
        "%",
    ]);
    prop::collection::vec(pieces, 1..6).prop_map(|pieces| format!("f{}", pieces.concat()))
}

fn template() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "cat {}",
        "head -n 40 {}",
        "sed -n '1,80p' {}",
        "nl -ba {}",
        "cat {} | head -n 3",
        "cd sub && cat ../{}",
        "grep -n needle {}",
        "cat {} | sort | uniq",
        "cat {} > /dev/null",
        "echo {}",
        "cat {}; ls",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Classification never changes the script that runs: the same call, classified or not,
    /// prints the same and ends the same, and `rawInput` is the script as typed. When it is
    /// classified, the file it names is the file bash read.
    #[test]
    fn classification_never_changes_what_runs(
        name in name(), style in 0u8..3, template in template()
    ) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let file = dir.path().join(&name);
        let content = format!("needle in {name:?}\n");
        std::fs::write(&file, &content).unwrap();
        let script = template.replace("{}", &quoted(&name, style));
        // A session each: a `cd` carries over to the session's next call.
        let typed = BashCall::new(script.clone());
        let model = BashCall::new(script.clone()).classified(true);
        let (card, typed_result) = run(&full_session(dir.path()), &typed, ClientFeatures::CARD);
        let (shown, model_result) = run(&full_session(dir.path()), &model, ClientFeatures::CARD);
        prop_assert_eq!(&typed_result.outcome.output, &model_result.outcome.output);
        prop_assert_eq!(&typed_result.outcome.status, &model_result.outcome.status);
        prop_assert_eq!(&typed_result.text, &model_result.text);
        let SessionUpdate::ToolCall(card_call) = &card[0] else { panic!("{:?}", card[0]) };
        let SessionUpdate::ToolCall(shown_call) = &shown[0] else { panic!("{:?}", shown[0]) };
        prop_assert_eq!(&card_call.raw_input, &shown_call.raw_input);
        prop_assert_eq!(
            shown_call.raw_input.as_ref().unwrap()["command"].as_str(),
            Some(script.as_str())
        );
        prop_assert_eq!(card_call.kind, ToolKind::Execute);
        if shown_call.kind == ToolKind::Execute {
            return Ok(());
        }
        // Classified: no card, the output as text on the final update, and the location is
        // the file bash opened (its content is what was printed).
        prop_assert!(shown_call.meta.is_none(), "{:?}", shown_call);
        let located = &shown_call.locations[0].path;
        prop_assert_eq!(located, &file, "{}", script);
        prop_assert!(model_result.outcome.output.contains(&content[..content.len() - 1]),
            "{} printed {:?}", script, model_result.outcome.output);
        let SessionUpdate::ToolCallUpdate(last) = shown.last().unwrap() else { panic!() };
        let text = format!("{:?}", last.fields.content);
        prop_assert!(text.contains("needle in"), "{}", text);
    }
}

/// The generator is not vacuous: it makes classified and unclassified calls alike.
#[test]
fn the_generator_makes_both_kinds() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut classified, mut not) = (0, 0);
    for _ in 0..200 {
        let (name, style, template) = (name(), 0u8..3, template())
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let script = template.replace("{}", &quoted(&name, style));
        match acp_bash::classify::classify(&script, Path::new("/w")) {
            Some(_) => classified += 1,
            None => not += 1,
        }
    }
    assert!(
        classified >= 40 && not >= 40,
        "{classified} classified, {not} not"
    );
}

/// A typed `cat f` (the shell driver) through the binary: a terminal card by default, a read
/// with its location with `--classify-typed`; the same output either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_commands_are_classified_only_when_asked() {
    use crate::support::acp::{binary, converse_with, temp_dir, PROTOCOL_SERVE_ARGS};
    use acp_bash::acp::client::{AcpClient, ClientProfile};
    let (_tmp, dir) = temp_dir();
    std::fs::write(dir.join("f.txt"), "typed\n").unwrap();
    let mut shown = Vec::new();
    for extra in [None, Some("--classify-typed")] {
        let mut args: Vec<&str> = PROTOCOL_SERVE_ARGS.to_vec();
        args.extend(extra);
        let client = AcpClient::new(binary(), args).profile(ClientProfile::Zed);
        let (turn, _) = converse_with(client, "typed cat", async |mut c| {
            let session = c.new_session(&dir).await?;
            c.prompt(&session, "cat f.txt").await
        })
        .await;
        let call = crate::support::acp::tool_call(&turn.updates).clone();
        shown.push((call.kind, call.title, call.locations.len()));
    }
    assert_eq!(
        shown,
        [
            (ToolKind::Execute, "cat f.txt".to_string(), 0),
            (ToolKind::Read, "Read f.txt".to_string(), 1),
        ]
    );
}
