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
    assert!(agent_text(&turns[1]).contains("Put back 2 file(s)"));
    assert!(!dir.join("n.txt").exists());
    // /undo 2 would undo the first append, but the second touched b.txt since: refused, named.
    let refused = agent_text(&turns[4]);
    assert!(refused.contains("Not undone"), "{refused}");
    assert!(
        refused.contains("`b.txt`: changed by a later command"),
        "{refused}"
    );
    assert!(edit_calls(&turns[4]).is_empty());
    // The last one can still be undone.
    assert!(agent_text(&turns[5]).contains("Put back 1 file(s)"));
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
/// listing (typed, shown as such with `--classify-typed`: their cards, no edit call), a `sed -i`
/// edit, a new file, a delete, then `/undo`. Only the calls' opening lines (read, search and
/// edit cards; a command card is pinned by the other transcripts, and workspace mode's first
/// output depends on the machine's sandbox support) and the agent's messages are kept. The v2
/// face's transcript of the same steps is `v2_face::changes_transcript_v2`.
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
        workspace_client(profile, &["--classify-typed"]),
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
            [
                "\"kind\":\"edit\"",
                "\"kind\":\"read\"",
                "\"kind\":\"search\"",
            ]
            .iter()
            .any(|kind| line.contains(kind))
                || line.contains("\"agent_message_chunk\"")
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

/// A `/bg` job's changes are shown when it ends: its edit call follows its card's final update,
/// and `/undo` reverts them (kept under the job's call id).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bg_jobs_changes_are_shown_when_it_ends_and_can_be_undone() {
    use super::jobs::{has_final, updates_until};
    let (_tmp, dir) = temp_dir();
    let dir = dir.canonicalize().unwrap();
    std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
    let work = dir.clone();
    let (turns, _) = converse_with(
        workspace_client(ClientProfile::Zed, &[]),
        "a job's changes",
        async move |mut c: Conversation| {
            let session = c.new_session(&work).await?;
            // The job is quick: its final update (and its edit call) may already be among the
            // updates the `/bg` turn collected; wait for it only where it is not.
            let mut job = c
                .prompt(
                    &session,
                    "/bg sed -i 's/one/ONE/' a.txt; printf 'job\\n' > job.txt",
                )
                .await?
                .updates;
            if !has_final(&job) {
                job.extend(updates_until(&mut c, &session, has_final).await);
            }
            // The edit call follows the final update at once: it is in by the next turn.
            job.extend(c.prompt(&session, "true").await?.updates);
            let undone = c.prompt(&session, "/undo").await?.updates;
            Ok(vec![job, undone])
        },
    )
    .await;
    // The job's final update is the first (`true` runs after it was seen).
    let final_at = turns[0]
        .iter()
        .position(|u| matches!(u, SessionUpdate::ToolCallUpdate(u) if u.fields.status.is_some()))
        .unwrap();
    assert!(
        edit_calls(&turns[0][..final_at]).is_empty(),
        "{:#?}",
        turns[0]
    );
    let edits = edit_calls(&turns[0]);
    assert_eq!(edits.len(), 1, "{:#?}", turns[0]);
    assert_eq!(edits[0].title, "Changed 2 files");
    let got = diffs(edits[0]);
    assert!(got.contains(&(
        dir.join("a.txt").to_string_lossy().into_owned(),
        Some("one\ntwo\n".to_string()),
        "ONE\ntwo\n".to_string()
    )));
    assert!(got.contains(&(
        dir.join("job.txt").to_string_lossy().into_owned(),
        None,
        "job\n".to_string()
    )));
    // It follows the job card's final update.
    let edit_at = turns[0]
        .iter()
        .position(|u| matches!(u, SessionUpdate::ToolCall(c) if c.kind == ToolKind::Edit))
        .unwrap();
    assert!(final_at < edit_at, "{:#?}", turns[0]);
    assert!(
        agent_text(&turns[1]).contains("Put back 2 file(s)"),
        "{:#?}",
        turns[1]
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert!(!dir.join("job.txt").exists());
}

/// The text only the undo store holds (a file's earlier content, replaced by a command): only
/// its reverse crosses into a command.
const STORE_SECRET: &str = "acpbash-undo-store-5e0d93";

/// The probe a command runs for [`the_undo_store_is_out_of_every_commands_reach`]: the agent's
/// process in sight, PID 1's `mem` and ptrace, and files holding the text.
fn store_probe() -> String {
    let reversed: String = STORE_SECRET.chars().rev().collect();
    format!(
        r#"needle=$(printf %s '{reversed}' | rev)
for d in /proc/[0-9]*; do
  [ "$d" = /proc/1 ] && continue
  case "$(cat "$d/comm" 2>/dev/null)" in acp-bash*) echo "agent in sight: $d" ;; esac
done
if exec 3</proc/1/mem 2>/dev/null; then echo "pid1 mem opened"; exec 3<&-; else echo "pid1 mem refused"; fi
perl -e 'my $r = syscall({ptrace}, 16, 1, 0, 0); print $r == 0 ? "pid1 ptrace attached\n" : "pid1 ptrace refused: $!\n"'
grep -rlaF "$needle" . /tmp /dev/shm 2>/dev/null | sed 's/^/file holds it: /'
echo probed"#,
        ptrace = if cfg!(target_arch = "aarch64") {
            117
        } else {
            101
        },
    )
}

/// Issue 47, point 3: the undo store is out of every command's reach. A file's earlier text,
/// after a command replaced it, is only in the agent's memory (`/undo` puts it back). Through
/// the served binary in workspace mode, as root and as nobody, a later command sees no
/// acp-bash process but its own PID 1 (its own PID namespace, a private /proc), cannot open
/// PID 1's `mem` nor ptrace it, and finds no file holding the text.
#[test]
fn the_undo_store_is_out_of_every_commands_reach() {
    use crate::support::sandbox::{as_root_and_nobody, require_namespaces};
    as_root_and_nobody(
        "acp::changes::the_undo_store_is_out_of_every_commands_reach",
        || {
            if !require_namespaces() {
                return;
            }
            use std::os::unix::fs::PermissionsExt;
            let ws = tempfile::Builder::new()
                .prefix("acpbash-store-")
                .tempdir_in("/var/tmp")
                .unwrap();
            std::fs::set_permissions(ws.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
            let dir = ws.path().canonicalize().unwrap();
            std::fs::write(dir.join("store.txt"), format!("{STORE_SECRET}\n")).unwrap();
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let turns = runtime.block_on(run_scripts(
                workspace_client(ClientProfile::Plain, &[]),
                &dir,
                &["sed -i 's/.*/replaced/' store.txt", &store_probe(), "/undo"],
            ));
            let how = format!("uid {}", unsafe { libc::geteuid() });
            let output = console_block(&turns[1]);
            // What the probe printed (the block also echoes the script, `$ ` lines).
            let printed: Vec<&str> = output.lines().filter(|l| !l.starts_with("$ ")).collect();
            let any = |prefix: &str| printed.iter().any(|l| l.starts_with(prefix));
            assert!(any("probed"), "{how}: {output}");
            assert!(!any("agent in sight"), "{how}: {output}");
            assert!(any("pid1 mem refused"), "{how}: {output}");
            assert!(!any("pid1 mem opened"), "{how}: {output}");
            assert!(any("pid1 ptrace refused"), "{how}: {output}");
            assert!(!any("file holds it"), "{how}: {output}");
            // The store held it all along: /undo puts it back.
            assert!(
                agent_text(&turns[2]).contains("Put back 1 file(s)"),
                "{how}: {:#?}",
                turns[2]
            );
            assert_eq!(
                std::fs::read_to_string(dir.join("store.txt")).unwrap(),
                format!("{STORE_SECRET}\n")
            );
        },
    );
}

/// A tmpfs mounted on a fresh directory (as root; elsewhere the directory itself), unmounted
/// (lazily) when dropped: a million files are made and dropped in memory, not on the disk.
struct Tmpfs {
    dir: tempfile::TempDir,
    mounted: bool,
}

impl Tmpfs {
    #[cfg(not(target_os = "linux"))]
    fn new() -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        Tmpfs {
            dir,
            mounted: false,
        }
    }

    #[cfg(target_os = "linux")]
    fn new() -> Tmpfs {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let mounted = unsafe { libc::geteuid() } == 0 && {
            let target = std::ffi::CString::new(dir.path().as_os_str().as_bytes()).unwrap();
            let options = c"size=1g,nr_inodes=1200000,mode=0700";
            unsafe {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    target.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    options.as_ptr().cast(),
                ) == 0
            }
        };
        Tmpfs { dir, mounted }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        #[cfg(not(target_os = "linux"))]
        let _ = self.mounted;
        #[cfg(target_os = "linux")]
        if self.mounted {
            use std::os::unix::ffi::OsStrExt;
            let target = std::ffi::CString::new(self.dir.path().as_os_str().as_bytes()).unwrap();
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// A `/proc/PID/status` figure in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Issue 47, point 5: one command creates a million files (and edits one more, after them:
/// the kernel's event queue has long overflowed by then). Through the served binary, on a
/// tmpfs: the edit call itemises at most 200 files and counts the rest by folder, every one of
/// the 1,000,001 counted once, the edit among them with its diff; the agent's peak memory
/// grows by less than 48 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_files_from_one_command_are_summarised_with_the_agents_memory_bounded() {
    use super::shutdown::RawAgent;
    use serde_json::{json, Value};
    let tmpfs = Tmpfs::new();
    let dir = tmpfs.dir.path().canonicalize().unwrap();
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    let mut agent = RawAgent::spawn(&["serve", "--sandbox", "workspace", "--no-history"]);
    let pid = agent.child.id().unwrap();
    let session = agent.start(&dir, "true").await;
    let answer = agent.answer(3).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let before = status_kib(pid, "VmHWM");
    let script = "mkdir many && cd many && seq -w 1 1000000 | xargs touch && cd .. && \
                  sed -i 's/one/ONE/' a.txt";
    let started = std::time::Instant::now();
    agent
        .send(
            json!({"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {
            "sessionId": session, "prompt": [{"type": "text", "text": script}]}}),
        )
        .await;
    let mut edit = None;
    loop {
        let line = agent
            .next_line_within(std::time::Duration::from_secs(900))
            .await
            .expect("the agent's next line");
        let value: Value = serde_json::from_str(&line).unwrap();
        if value["id"] == 5 {
            assert_eq!(value["result"]["stopReason"], "end_turn", "{value}");
            break;
        }
        if value["params"]["update"]["kind"] == "edit" {
            edit = Some(value["params"]["update"].clone());
        }
    }
    let took = started.elapsed();
    let grew = status_kib(pid, "VmHWM").saturating_sub(before);
    eprintln!(
        "a million files: {took:?}, tmpfs {}, VmHWM {before} KiB + {grew} KiB",
        tmpfs.mounted
    );
    let edit = edit.expect("an edit call");
    assert_eq!(edit["title"], "Changed 1000001 files", "{}", edit["title"]);
    let items = edit["content"].as_array().unwrap();
    let diffs: Vec<&Value> = items.iter().filter(|c| c["type"] == "diff").collect();
    assert!(diffs.len() <= 200, "{}", diffs.len());
    assert_eq!(diffs[0]["path"], dir.join("a.txt").to_str().unwrap());
    assert_eq!(diffs[0]["oldText"], "one\n");
    assert_eq!(diffs[0]["newText"], "ONE\n");
    assert!(grew < 48 * 1024, "the peak RSS grew by {grew} KiB");
    drop(agent);
}

/// The names, types, modes and contents of a folder's entries (a canary's whole state).
fn canary_state(dir: &std::path::Path) -> Vec<(String, String)> {
    use std::os::unix::fs::PermissionsExt;
    let mut state: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            let body = match meta.is_file() {
                true => std::fs::read_to_string(entry.path()).unwrap(),
                false => format!("{:?}", meta.file_type()),
            };
            (
                entry.file_name().to_string_lossy().into_owned(),
                format!("{:o} {body}", meta.permissions().mode()),
            )
        })
        .collect();
    state.sort();
    state
}

/// A folder in /var/tmp every user may write (the test may run as nobody; /tmp is private to
/// commands).
fn shared_folder(prefix: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// The program of the `/bg` job of [`undo_never_writes_outside_through_a_folder_swapped_for_a_symlink`]
/// (`perl swapper.pl CANARY`): makes `swap`, a symlink to the canary folder, then exchanges `d`
/// and `swap` (`renameat2(RENAME_EXCHANGE)`) as fast as it can until `stop` appears, leaving
/// `d` the folder again; `swapping` says it started.
fn swapper_program() -> String {
    let renameat2 = if cfg!(target_arch = "aarch64") {
        276
    } else {
        316
    };
    format!(
        r#"use strict;
my ($d, $swap, $swaps, $end) = ("d", "swap", 0, time + 300);
unlink "stop";
symlink($ARGV[0], $swap) or die "symlink: $!\n";
sub swap {{ syscall({renameat2}, -100, $d, -100, $swap, 2) == 0 or die "renameat2: $!\n"; $swaps++ }}
swap();
open(my $f, ">", "swapping") or die "swapping: $!\n"; close $f;
while (!-e "stop" && time < $end) {{ swap() for 1 .. 500 }}
swap() if -l $d;
unlink $swap, "stop";
print "swapped $swaps times\n";
"#
    )
}

/// Issue 47, point 5 for `/undo`'s writes (the agent writes unsandboxed). Through the served
/// binary in workspace mode, as root and as nobody:
/// - a file replaced by a symlink to a file outside after the command (and a deleted file's
///   name made such a symlink) is named by `/undo`, never followed; once they are put back as
///   the command left them, `/undo` puts back both;
/// - a `/bg` job swaps the folder `d` with a symlink to a canary folder outside, as fast as it
///   can, while `/undo` restores, re-creates and deletes files in `d`: every `/undo` either
///   did the whole job (in `d`, whatever its name was meanwhile) or refused, naming the
///   files, touching nothing; the canary's files and listing never change. (Planted: the
///   old `canonicalize` check then a write by path changed the canary.)
#[test]
fn undo_never_writes_outside_through_a_folder_swapped_for_a_symlink() {
    use super::jobs::{has_final, updates_until};
    use crate::support::sandbox::{as_root_and_nobody, require_namespaces};
    as_root_and_nobody(
        "acp::changes::undo_never_writes_outside_through_a_folder_swapped_for_a_symlink",
        || {
            if !require_namespaces() {
                return;
            }
            let ws = shared_folder("acpbash-undo-swap-");
            let canary_dir = shared_folder("acpbash-canary-");
            let dir = ws.path().canonicalize().unwrap();
            let canary = canary_dir.path().canonicalize().unwrap();
            for name in ["a.txt", "del.txt", "new.txt", "f.txt", "g.txt"] {
                std::fs::write(canary.join(name), format!("canary {name}\n")).unwrap();
            }
            let before = canary_state(&canary);
            let how = format!("uid {}", unsafe { libc::geteuid() });
            std::fs::create_dir(dir.join("d")).unwrap();
            std::fs::write(dir.join("f.txt"), "f\n").unwrap();
            std::fs::write(dir.join("g.txt"), "g\n").unwrap();
            std::fs::write(dir.join("swapper.pl"), swapper_program()).unwrap();
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let work = dir.clone();
            let outside = canary.clone();
            let (mut rounds, _) = runtime.block_on(converse_with(
                workspace_client(ClientProfile::Plain, &[]),
                "undo and a file made a symlink",
                async move |mut c: Conversation| {
                    let session = c.new_session(&work).await?;
                    // The file itself a symlink to outside: named, not followed.
                    c.prompt(&session, "printf 'F\\n' > f.txt; rm g.txt")
                        .await?;
                    std::fs::remove_file(work.join("f.txt")).unwrap();
                    std::os::unix::fs::symlink(outside.join("f.txt"), work.join("f.txt")).unwrap();
                    std::os::unix::fs::symlink(outside.join("g.txt"), work.join("g.txt")).unwrap();
                    let refused = agent_text(&c.prompt(&session, "/undo").await?.updates);
                    std::fs::remove_file(work.join("f.txt")).unwrap();
                    std::fs::remove_file(work.join("g.txt")).unwrap();
                    std::fs::write(work.join("f.txt"), "F\n").unwrap();
                    let undone = agent_text(&c.prompt(&session, "/undo").await?.updates);
                    Ok(vec![(refused, 0), (undone, 0)])
                },
            ));
            // A folder swapped for a symlink while /undo writes in it: one agent a round.
            for round in 0..6 {
                let (work, outside, unchanged) = (dir.clone(), canary.clone(), before.clone());
                let (outcome, _) = runtime.block_on(converse_with(
                    workspace_client(ClientProfile::Plain, &[]),
                    "undo under a swap",
                    async move |mut c: Conversation| {
                        let session = c.new_session(&work).await?;
                        std::fs::write(work.join("d/a.txt"), "one\n").unwrap();
                        std::fs::write(work.join("d/del.txt"), "bye\n").unwrap();
                        let _ = std::fs::remove_file(work.join("d/new.txt"));
                        c.prompt(
                            &session,
                            "sed -i 's/one/ONE/' d/a.txt; rm d/del.txt; printf 'new\\n' > d/new.txt",
                        )
                        .await?;
                        let job = format!(
                            "/bg perl swapper.pl {} || touch swapping",
                            outside.display()
                        );
                        let mut since = c.prompt(&session, &job).await?.updates;
                        wait_for_file(&work.join("swapping")).await;
                        let started = std::time::Instant::now();
                        let mut attempts = 0;
                        let mut text = String::new();
                        while attempts < 200 && started.elapsed().as_secs() < 20 {
                            attempts += 1;
                            let updates = c.prompt(&session, "/undo").await?.updates;
                            text = agent_text(&updates);
                            since.extend(updates);
                            if !text.starts_with("Not undone") {
                                break;
                            }
                            assert!(
                                text.contains("(no file was touched)")
                                    && (text.contains("deleted since")
                                        || text.contains("changed since")
                                        || text.contains("now a symlink or a file")),
                                "{text}"
                            );
                        }
                        std::fs::write(work.join("stop"), "").unwrap();
                        if !has_final(&since) {
                            since.extend(updates_until(&mut c, &session, has_final).await);
                        }
                        std::fs::remove_file(work.join("swapping")).unwrap();
                        let job_said = console_block(&since);
                        assert!(job_said.contains("swapped "), "the job: {job_said}");
                        assert_eq!(canary_state(&outside), unchanged, "the canary changed: {text}");
                        let d = |name: &str| std::fs::read_to_string(work.join("d").join(name));
                        match text.starts_with("Put back 3 file(s)") {
                            true => {
                                assert_eq!(d("a.txt").unwrap(), "one\n");
                                assert_eq!(d("del.txt").unwrap(), "bye\n");
                                assert!(d("new.txt").is_err());
                            }
                            false => {
                                assert!(text.starts_with("Not undone"), "{text}");
                                assert_eq!(d("a.txt").unwrap(), "ONE\n");
                                assert!(d("del.txt").is_err());
                                assert_eq!(d("new.txt").unwrap(), "new\n");
                            }
                        }
                        Ok((text, attempts))
                    },
                ));
                eprintln!(
                    "{how}: round {round}: {} attempts: {}",
                    outcome.1, outcome.0
                );
                rounds.push(outcome);
            }
            eprintln!("{how}: {rounds:?}");
            assert_eq!(canary_state(&canary), before, "{how}: the canary changed");
            let (refused, undone) = (&rounds[0].0, &rounds[1].0);
            assert!(refused.starts_with("Not undone"), "{how}: {refused}");
            assert!(
                refused.contains("`f.txt`: changed since"),
                "{how}: {refused}"
            );
            assert!(
                refused.contains("`g.txt`: changed since"),
                "{how}: {refused}"
            );
            assert!(undone.starts_with("Put back 2 file(s)"), "{how}: {undone}");
            assert_eq!(std::fs::read_to_string(dir.join("f.txt")).unwrap(), "f\n");
            assert_eq!(std::fs::read_to_string(dir.join("g.txt")).unwrap(), "g\n");
            // Each round ended done or refused (asserted above); some did the job under the
            // swap, so the writes really raced it.
            let did = rounds[2..]
                .iter()
                .filter(|(text, _)| text.starts_with("Put back 3 file(s)"))
                .count();
            assert!(did >= 1, "{how}: no /undo got through the swap: {rounds:?}");
        },
    );
}

/// Issue 47, point 2 on `session/load`: another agent process loading the session replays
/// each command's edit call (and a `/bg` job's) after its card's final update, as it was sent
/// live: the same title, diffs, text and locations.
async fn edit_calls_are_replayed_on_load(profile: ClientProfile) {
    use super::jobs::{has_final, updates_until};
    use serde_json::Value;
    let (_tmp, dir) = temp_dir();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
    let client = || {
        AcpClient::new(
            binary(),
            [
                "serve",
                "--sandbox",
                "workspace",
                "--state-dir",
                state.path().to_str().unwrap(),
                "--log-level",
                "acp_bash=debug",
            ],
        )
        .profile(profile)
    };
    let work = dir.clone();
    let ((session, live), _) = converse_with(client(), "make", async move |mut c| {
        let session = c.new_session(&work).await?;
        let mut live = c
            .prompt(&session, "sed -i 's/two/TWO/' a.txt; printf 'n\\n' > n.txt")
            .await?
            .updates;
        let mut job = c
            .prompt(&session, "/bg rm n.txt; printf 'job\\n' > job.txt")
            .await?
            .updates;
        if !has_final(&job) {
            job.extend(updates_until(&mut c, &session, has_final).await);
        }
        live.extend(job);
        // The job's edit call follows its final update at once: it is in by this turn's end.
        live.extend(c.prompt(&session, "true").await?.updates);
        Ok((session, live))
    })
    .await;
    let work = dir.clone();
    let (replayed, _) = converse_with(client(), "load", async move |mut c| {
        let (_, replayed) = c.load_session(&session, &work).await?;
        Ok(replayed)
    })
    .await;
    let json = |calls: Vec<&ToolCall>| -> Vec<Value> {
        calls
            .into_iter()
            .map(|call| serde_json::to_value(call).unwrap())
            .collect()
    };
    let (live_edits, replayed_edits) = (json(edit_calls(&live)), json(edit_calls(&replayed)));
    assert_eq!(live_edits.len(), 2, "{live:#?}");
    assert_eq!(replayed_edits, live_edits, "{replayed:#?}");
    assert_eq!(replayed_edits[0]["title"], "Changed 2 files");
    assert_eq!(replayed_edits[1]["title"], "Changed 2 files");
    // Each right after its card's final update.
    for edit in edit_calls(&replayed) {
        let card = edit.tool_call_id.0.strip_suffix("-changes").unwrap();
        let edit_at = replayed
            .iter()
            .position(|u| matches!(u, SessionUpdate::ToolCall(c) if c == edit))
            .unwrap();
        let final_at = replayed
            .iter()
            .position(|u| {
                matches!(u, SessionUpdate::ToolCallUpdate(u)
                    if &*u.tool_call_id.0 == card && u.fields.status.is_some())
            })
            .unwrap_or_else(|| panic!("the final update of {card}: {replayed:#?}"));
        assert_eq!(final_at + 1, edit_at, "{replayed:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_calls_are_replayed_on_load_zed() {
    edit_calls_are_replayed_on_load(ClientProfile::Zed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_calls_are_replayed_on_load_plain() {
    edit_calls_are_replayed_on_load(ClientProfile::Plain).await;
}

/// Issue 47, point 2: files the repository's `.gitignore` ignores are counted by folder, not
/// diffed; a change made between two commands (the user's editor) is attributed to neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_files_are_counted_and_changes_between_commands_are_not_attributed() {
    let (_tmp, dir) = temp_dir();
    std::fs::write(dir.join(".gitignore"), "target/\n").unwrap();
    std::fs::write(dir.join("kept.txt"), "k\n").unwrap();
    let work = dir.clone();
    let (turns, _) = converse_with(
        workspace_client(ClientProfile::Zed, &[]),
        "ignored and between",
        async move |mut c: Conversation| {
            let session = c.new_session(&work).await?;
            let first = c
                .prompt(
                    &session,
                    "mkdir -p target && for i in 1 2 3; do echo $i > target/f$i; done; echo x >> kept.txt",
                )
                .await?
                .updates;
            // The user's editor, between the two commands.
            std::fs::write(work.join("editor.txt"), "from the editor\n").unwrap();
            std::fs::write(work.join("kept.txt"), "k\nx\nedited\n").unwrap();
            let second = c.prompt(&session, "echo y > other.txt").await?.updates;
            Ok(vec![first, second])
        },
    )
    .await;
    let edit = edit_calls(&turns[0])[0];
    assert_eq!(edit.title, "Changed 4 files", "{edit:#?}");
    let paths: Vec<String> = diffs(edit).into_iter().map(|(path, ..)| path).collect();
    assert_eq!(
        paths,
        [dir.join("kept.txt").to_string_lossy().into_owned()],
        "{edit:#?}"
    );
    let notes = texts(&edit.content).join("\n");
    assert!(
        notes.contains("# target/: 3 file(s) changed, counted not itemised"),
        "{notes}"
    );
    let edit = edit_calls(&turns[1])[0];
    assert_eq!(edit.title, "Changed 1 file", "{edit:#?}");
    assert_eq!(
        diffs(edit),
        [(
            dir.join("other.txt").to_string_lossy().into_owned(),
            None,
            "y\n".to_string()
        )]
    );
}

/// `/undo CALL-ID` puts back the changes of the call with that id (an earlier one, not the
/// last), leaves the later command's file alone, names the call it undid, and an id no kept
/// call has is refused with what is kept. Planted "an id is read as the last command": caught.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_by_call_id_reverts_that_call_only() {
    let (_tmp, dir) = temp_dir();
    let dir = dir.canonicalize().unwrap();
    std::fs::write(dir.join("a.txt"), "a\n").unwrap();
    std::fs::write(dir.join("b.txt"), "b\n").unwrap();
    let root = dir.clone();
    let (first_id, answer, unknown) = converse_with(
        workspace_client(ClientProfile::Zed, &[]),
        "undo-by-id",
        async move |mut c: Conversation| {
            let session = c.new_session(&root).await?;
            let first = c.prompt(&session, "echo A >> a.txt").await?.updates;
            let id = first
                .iter()
                .find_map(|u| match u {
                    SessionUpdate::ToolCall(call) if call.kind != ToolKind::Edit => {
                        Some(call.tool_call_id.0.to_string())
                    }
                    _ => None,
                })
                .expect("the first command's card");
            c.prompt(&session, "echo B >> b.txt").await?;
            let undone = c.prompt(&session, &format!("/undo {id}")).await?.updates;
            let unknown = c.prompt(&session, "/undo no-such-call").await?.updates;
            Ok((id, agent_text(&undone), agent_text(&unknown)))
        },
    )
    .await
    .0;
    assert!(
        answer.contains(&format!(
            "Put back 1 file(s) as they were before call `{first_id}`"
        )),
        "{answer}"
    );
    assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "a\n");
    assert_eq!(
        std::fs::read_to_string(dir.join("b.txt")).unwrap(),
        "b\nB\n"
    );
    assert!(unknown.contains("Nothing to undo"), "{unknown}");
}
