//! What a command changed, shown (`acp_bash::changes`), through the served binary over pipes in
//! workspace mode: an edit call after the command's card with one diff per file, the ```diff
//! block for plain clients, nothing when nothing changed or with `--no-changes`, hostile names
//! and symlinks shown without breaking anything, and a command racing its own diff.

use acp_bash::acp::client::{AcpClient, ClientProfile, Conversation};
use agent_client_protocol::v1::schema::{SessionUpdate, ToolCall, ToolCallContent, ToolKind};

use crate::support::acp::*;

/// The agent in workspace mode (change tracking is on there by default), plus `extra` flags.
pub fn workspace_client(profile: ClientProfile, extra: &[&str]) -> AcpClient {
    let mut args = vec![
        "serve",
        "--sandbox",
        "workspace",
        "--no-history",
        "--log-level",
        "acp_bash=debug",
    ];
    args.extend_from_slice(extra);
    AcpClient::new(binary(), args).profile(profile)
}

/// The edit calls among `updates`.
pub fn edit_calls(updates: &[SessionUpdate]) -> Vec<&ToolCall> {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCall(call) if call.kind == ToolKind::Edit => Some(call),
            _ => None,
        })
        .collect()
}

/// Runs each of `scripts` as a prompt in one session on `dir`; every turn's updates.
pub async fn run_scripts(
    client: AcpClient,
    dir: &std::path::Path,
    scripts: &[&str],
) -> Vec<Vec<SessionUpdate>> {
    let dir = dir.to_path_buf();
    let scripts: Vec<String> = scripts.iter().map(|s| s.to_string()).collect();
    converse_with(client, "changes", async move |mut c: Conversation| {
        let session = c.new_session(&dir).await?;
        let mut turns = Vec::new();
        for script in &scripts {
            turns.push(c.prompt(&session, script).await?.updates);
        }
        Ok(turns)
    })
    .await
    .0
}

fn diffs(call: &ToolCall) -> Vec<(String, Option<String>, String)> {
    call.content
        .iter()
        .filter_map(|c| match c {
            ToolCallContent::Diff(d) => Some((
                d.path.to_string_lossy().into_owned(),
                d.old_text.clone(),
                d.new_text.clone(),
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sed_edit_a_new_file_a_delete_and_a_rename_are_shown_after_the_card() {
    let (_tmp, dir) = temp_dir();
    let dir = dir.canonicalize().unwrap();
    std::fs::write(dir.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(dir.join("gone.txt"), "bye\n").unwrap();
    std::fs::write(dir.join("old.txt"), "moving\n").unwrap();
    let turns = run_scripts(
        workspace_client(ClientProfile::Zed, &[]),
        &dir,
        &[
            "sed -i 's/two/TWO/' a.txt",
            "printf 'hello\\n' > new.txt; rm gone.txt; mv old.txt moved.txt",
            "true",
        ],
    )
    .await;
    // The sed edit: one diff, after the command's final update.
    let edits = edit_calls(&turns[0]);
    assert_eq!(edits.len(), 1, "{:#?}", turns[0]);
    let edit = edits[0];
    assert_eq!(edit.title, "Changed 1 file");
    let a = dir.join("a.txt").to_string_lossy().into_owned();
    assert_eq!(
        diffs(edit),
        vec![(
            a.clone(),
            Some("one\ntwo\nthree\n".to_string()),
            "one\nTWO\nthree\n".to_string()
        )]
    );
    assert_eq!(edit.locations[0].path.to_string_lossy(), a);
    let final_at = turns[0]
        .iter()
        .position(|u| matches!(u, SessionUpdate::ToolCallUpdate(u) if u.fields.status.is_some()))
        .expect("the card's final update");
    let edit_at = turns[0]
        .iter()
        .position(|u| matches!(u, SessionUpdate::ToolCall(c) if c.kind == ToolKind::Edit))
        .unwrap();
    assert!(
        final_at < edit_at,
        "the edit call follows the command's card"
    );
    // A new file (oldText null), a delete, a rename.
    let edit = edit_calls(&turns[1])[0];
    assert_eq!(edit.title, "Changed 3 files");
    let got = diffs(edit);
    assert!(got.contains(&(
        dir.join("new.txt").to_string_lossy().into_owned(),
        None,
        "hello\n".to_string()
    )));
    assert!(got.contains(&(
        dir.join("gone.txt").to_string_lossy().into_owned(),
        Some("bye\n".to_string()),
        String::new()
    )));
    assert!(got.contains(&(
        dir.join("moved.txt").to_string_lossy().into_owned(),
        Some("moving\n".to_string()),
        "moving\n".to_string()
    )));
    // Nothing changed: no edit call.
    assert!(edit_calls(&turns[2]).is_empty(), "{:#?}", turns[2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_changes_turns_it_off_and_other_modes_do_not_track() {
    let (_tmp, dir) = temp_dir();
    let turns = run_scripts(
        workspace_client(ClientProfile::Zed, &["--no-changes"]),
        &dir,
        &["echo x > f.txt"],
    )
    .await;
    assert!(dir.join("f.txt").exists());
    assert!(edit_calls(&turns[0]).is_empty());
    let turns = run_scripts(client(ClientProfile::Zed), &dir, &["echo y > g.txt"]).await;
    assert!(dir.join("g.txt").exists());
    assert!(edit_calls(&turns[0]).is_empty(), "full mode is not tracked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_client_also_gets_a_bounded_diff_block() {
    let (_tmp, dir) = temp_dir();
    std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
    let turns = run_scripts(
        workspace_client(ClientProfile::Plain, &[]),
        &dir,
        &["sed -i 's/two/TWO/' a.txt; seq 1 100000 > big.txt; head -c 3000 /dev/urandom > b.bin"],
    )
    .await;
    let edit = edit_calls(&turns[0])[0];
    let block = texts(&edit.content).join("\n");
    assert!(block.starts_with("```diff\n"), "{block}");
    assert!(block.contains("--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"));
    assert!(
        block.contains("# b.bin (binary, none → 2.9 KiB)"),
        "{block}"
    );
    assert!(block.len() < 30 * 1024, "bounded: {}", block.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_and_an_outside_symlink_are_named_not_followed() {
    let (_tmp, dir) = temp_dir();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "do not show\n").unwrap();
    let script = format!(
        "printf 'x\\n' > \"$(printf 'new\\nline')\"; printf 'y\\n' > \"$(printf 'esc\\033[31m')\"; \
         printf 'z\\n' > '`id`'; printf 'w\\n' > \"$(printf 'bad\\377')\"; \
         ln -s {}/secret link; touch ../escape 2>/dev/null; true",
        outside.path().display()
    );
    let turns = run_scripts(
        workspace_client(ClientProfile::Plain, &[]),
        &dir,
        &[&script],
    )
    .await;
    let edit = edit_calls(&turns[0])[0];
    assert_eq!(edit.title, "Changed 5 files");
    let block = texts(&edit.content).join("\n");
    assert!(block.contains("b/new\\nline\n"), "{block}");
    assert!(block.contains("b/esc\\x1b[31m\n"), "{block}");
    assert!(block.contains("b/`id`\n"), "{block}");
    assert!(block.contains("b/bad\u{fffd}\n"), "{block}");
    assert!(
        block.contains(&format!(
            "# link (symlink, not followed, none → → {}/secret)",
            outside.path().display()
        )),
        "{block}"
    );
    assert!(!block.contains("do not show"), "{block}");
    assert!(!block.contains("escape"), "{block}");
    // Every line of the block is a line of the block: no name broke it.
    assert_eq!(block.matches("```").count(), 2, "{block}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_racing_its_diff_shows_a_state_the_file_had() {
    let (_tmp, dir) = temp_dir();
    // A background writer keeps rewriting the file whole, each version one repeated letter,
    // while the command ends and its diff is taken.
    let script = "(for i in $(seq 1 400); do for c in a b c d; do \
                  printf \"$c%.0s\" $(seq 1 2000) > race.txt; done; done) & \
                  sleep 0.05";
    let turns = run_scripts(
        workspace_client(ClientProfile::Zed, &[]),
        &dir,
        &[script, "wait; true"],
    )
    .await;
    for turn in &turns {
        for edit in edit_calls(turn) {
            for (_, old, new) in diffs(edit) {
                for text in old.iter().chain(std::iter::once(&new)) {
                    let first = text.chars().next();
                    assert!(
                        text.is_empty() || text.chars().all(|c| Some(c) == first),
                        "a torn state: {text:?}"
                    );
                }
            }
        }
    }
}

/// The agent is SIGKILLed while a command that has written runs, and right after one that
/// wrote and deleted: every write is on disk as the command made it (nothing was staged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_agent_during_and_after_a_write_loses_nothing() {
    use super::shutdown::RawAgent;
    let args = ["serve", "--sandbox", "workspace", "--no-history"];
    // During: the command has written and edited, and still runs.
    let (_tmp, dir) = temp_dir();
    std::fs::write(dir.join("keep.txt"), "kept\n").unwrap();
    let mut agent = RawAgent::spawn(&args);
    agent
        .start(
            &dir,
            "printf 'one\\n' > w.txt; sed -i 's/one/two/' w.txt; printf 'x\\n' >> keep.txt; \
             touch written; while [ ! -e go ]; do sleep 0.01; done",
        )
        .await;
    wait_for_file(&dir.join("written")).await;
    agent.child.start_kill().unwrap();
    agent.wait("the killed agent").await;
    assert_eq!(std::fs::read_to_string(dir.join("w.txt")).unwrap(), "two\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("keep.txt")).unwrap(),
        "kept\nx\n"
    );
    std::fs::write(dir.join("go"), "").unwrap();
    // After: the command has ended (its answer came), then the agent is killed.
    let (_tmp2, dir) = temp_dir();
    std::fs::write(dir.join("gone.txt"), "bye\n").unwrap();
    let mut agent = RawAgent::spawn(&args);
    agent
        .start(
            &dir,
            "printf 'a\\n' > x.txt; rm gone.txt; mkdir -p d; printf 'b\\n' > d/y.txt",
        )
        .await;
    let answer = agent.answer(3).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    agent.child.start_kill().unwrap();
    agent.wait("the killed agent").await;
    assert_eq!(std::fs::read_to_string(dir.join("x.txt")).unwrap(), "a\n");
    assert_eq!(std::fs::read_to_string(dir.join("d/y.txt")).unwrap(), "b\n");
    assert!(!dir.join("gone.txt").exists());
}

fn messages(updates: &[SessionUpdate]) -> String {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                agent_client_protocol::v1::schema::ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_reverts_the_last_command_and_refuses_on_a_conflict_naming_the_files() {
    let (_tmp, dir) = temp_dir();
    let dir = dir.canonicalize().unwrap();
    std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(dir.join("b.txt"), "b\n").unwrap();
    let turns = run_scripts(
        workspace_client(ClientProfile::Zed, &[]),
        &dir,
        &[
            "sed -i 's/two/TWO/' a.txt; printf 'n\\n' > n.txt",
            "/undo",
            "printf '1\\n' >> b.txt",
            "printf '2\\n' >> b.txt",
            "/undo 2",
            "/undo",
        ],
    )
    .await;
    // /undo: the files as they were, and the revert as a diff card.
    let revert = edit_calls(&turns[1]);
    assert_eq!(revert.len(), 1, "{:#?}", turns[1]);
    assert_eq!(revert[0].title, "Reverted 2 files");
    assert!(diffs(revert[0]).contains(&(
        dir.join("a.txt").to_string_lossy().into_owned(),
        Some("one\nTWO\n".to_string()),
        "one\ntwo\n".to_string()
    )));
    assert!(messages(&turns[1]).contains("Put back 2 file(s)"));
    assert!(!dir.join("n.txt").exists());
    // /undo 2 would undo the first append, but the second touched b.txt since: refused, named.
    let refused = messages(&turns[4]);
    assert!(refused.contains("Not undone"), "{refused}");
    assert!(
        refused.contains("`b.txt`: changed by a later command"),
        "{refused}"
    );
    assert!(edit_calls(&turns[4]).is_empty());
    // The last one can still be undone.
    assert!(messages(&turns[5]).contains("Put back 1 file(s)"));
    assert_eq!(
        std::fs::read_to_string(dir.join("b.txt")).unwrap(),
        "b\n1\n"
    );
}

/// The model reads one line that says what its command changed, after the status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_reads_a_summary_line() {
    use acp_bash::acp::bridge::ClientFeatures;
    use acp_bash::acp::ToolCallRunner;
    use acp_bash::exec::{Engine, EngineConfig};
    use agent_client_protocol::v1::schema::ToolCallId;
    let (_tmp, dir) = temp_dir();
    std::fs::write(dir.join("a.rs"), "a\nb\nc\n").unwrap();
    std::fs::write(dir.join("c.txt"), "c\n").unwrap();
    let engine = Engine::new(EngineConfig::default().track_changes(true));
    let session = engine.session(&dir).unwrap();
    let mut sink = |_: SessionUpdate| {};
    let text = ToolCallRunner::new(ClientFeatures::default())
        .run_model_call(
            &session,
            &ToolCallId::new("m-1"),
            r#"{"command": "sed -i 's/b/B/' a.rs; echo d >> a.rs; echo x > b.txt; rm c.txt"}"#,
            &mut sink,
            &tokio_util::sync::CancellationToken::new(),
        )
        .await;
    assert!(
        text.ends_with("\n[changed: a.rs +2 −1, b.txt new, c.txt deleted]"),
        "{text}"
    );
}

/// Snapshot transcripts of what a client gets for each kind of change: a read, a search and a
/// listing (no edit call), a `sed -i` edit, a new file, a delete, then `/undo`. Only the edit
/// calls and the agent's messages are kept: the command cards are pinned by the other
/// transcripts, and workspace mode's first output depends on the machine's sandbox support.
async fn changes_transcript(profile: ClientProfile) -> Vec<String> {
    let (_tmp, dir) = temp_dir();
    let dir = dir.canonicalize().unwrap();
    std::fs::write(dir.join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    std::fs::write(dir.join("old.txt"), "old\n").unwrap();
    let prompts = [
        "cat notes.txt",
        "grep -n beta notes.txt",
        "ls",
        "sed -i 's/beta/BETA/' notes.txt",
        "printf 'fresh\\n' > new.txt",
        "rm old.txt",
        "/undo",
    ];
    let work = dir.clone();
    let (_, transcript) = converse_with(
        workspace_client(profile, &[]),
        "changes transcript",
        async move |mut c: Conversation| {
            let session = c.new_session(&work).await?;
            for prompt in prompts {
                c.prompt(&session, prompt).await?;
            }
            Ok(())
        },
    )
    .await;
    let kept: Vec<String> = transcript
        .lines()
        .into_iter()
        .filter(|line| {
            line.contains("\"kind\":\"edit\"") || line.contains("\"agent_message_chunk\"")
        })
        .collect();
    normalize_transcript(&kept, &dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcript_zed() {
    let lines = changes_transcript(ClientProfile::Zed).await;
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("changes__zed", lines.join("\n"));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcript_plain() {
    let lines = changes_transcript(ClientProfile::Plain).await;
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("changes__plain", lines.join("\n"));
    });
}
