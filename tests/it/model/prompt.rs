//! The system prompt (`src/driver/model/prompt.md`, filled by `system::system_prompt`): its parts
//! pinned (a workflow, editing idioms that work through bash, the OS, the date, the command
//! timeout), the project's AGENTS.md / CLAUDE.md from the session's folder up to the
//! repository's root, bounded, and never through a symlink or a FIFO; a reply cut off by the
//! token limit runs nothing and gets a hint and a larger budget.

use std::time::Duration;

use acp_bash::driver::model::{project_docs, system, Provider};
use acp_bash::exec::{Engine, EngineConfig};
use acp_bash::sandbox::Mode;

use super::harness::{config, prompt, Event, Host};
use crate::support::fake_model::{openai, Answer, FakeModel};
use acp_bash::driver::model::ModelDriver;

fn prompt_for(dir: &std::path::Path) -> String {
    let engine = Engine::new(
        EngineConfig::default()
            .sandbox_mode(Mode::Full)
            .default_timeout(Duration::from_secs(90)),
    );
    let session = engine.session(dir).unwrap();
    system::system_prompt(&session, 16 * 1024)
}

/// Every part the prompt promises is there, every hole is filled.
#[test]
fn the_prompt_has_a_workflow_idioms_and_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let text = prompt_for(dir.path());
    for part in [
        // The workflow.
        "Explore",
        "Reproduce",
        "Edit",
        "Verify",
        "summary of what you changed",
        // Editing idioms.
        "nl -ba FILE | sed -n",
        "<<'EOF'",
        "python3 - <<'EOF'",
        "assert s.count(old) == 1",
        "sed -i",
        "cat >> FILE <<'EOF'",
        // The environment.
        "The operating system is Linux",
        "killed after 90 seconds",
        "timeout_ms",
        "background: true",
        "at most 16384 bytes",
    ] {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
    let today = std::process::Command::new("date")
        .args(["-u", "+%F"])
        .output()
        .unwrap();
    let today = String::from_utf8(today.stdout).unwrap();
    assert!(
        text.contains(&format!("today's date is {}", today.trim())),
        "{text}"
    );
    let root = dir.path().display().to_string();
    assert!(text.contains(&format!("directory is {root}")), "{text}");
    for hole in [
        "{os}",
        "{date}",
        "{root}",
        "{cwd}",
        "{mode_id}",
        "{mode_text}",
        "{timeout}",
        "{budget}",
        "{instructions}",
    ] {
        assert!(!text.contains(hole), "{hole} left in the prompt");
    }
    // No instructions section without an AGENTS.md.
    assert!(!text.contains("project's instructions"), "{text}");
    assert_eq!(system::today(std::time::UNIX_EPOCH), "1970-01-01");
    assert_eq!(
        system::today(std::time::UNIX_EPOCH + Duration::from_secs(1_796_515_200)),
        "2026-12-06"
    );
}

/// AGENTS.md and CLAUDE.md from the repository's root down to the session's folder, the root's
/// first; nothing above the repository; the same text once; a `{hole}` in them left alone.
#[test]
fn agents_md_is_read_from_the_session_folder_up_to_the_repository_root() {
    let top = tempfile::tempdir().unwrap();
    let repo = top.path().join("repo");
    let sub = repo.join("crates/sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::create_dir(repo.join(".git")).unwrap();
    std::fs::write(top.path().join("AGENTS.md"), "ABOVE-THE-REPO\n").unwrap();
    std::fs::write(
        repo.join("AGENTS.md"),
        "ROOT-RULE: run `make test` {date}\n",
    )
    .unwrap();
    std::fs::write(sub.join("AGENTS.md"), "SUB-RULE\n").unwrap();
    std::fs::write(sub.join("CLAUDE.md"), "CLAUDE-RULE\n").unwrap();
    std::fs::write(repo.join("crates/CLAUDE.md"), "SUB-RULE\n").unwrap();
    let text = prompt_for(&sub);
    assert!(!text.contains("ABOVE-THE-REPO"), "{text}");
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle} missing:\n{text}"))
    };
    assert!(at("ROOT-RULE") < at("SUB-RULE") && at("SUB-RULE") < at("CLAUDE-RULE"));
    assert_eq!(text.matches("SUB-RULE").count(), 1, "{text}");
    assert!(text.contains("run `make test` {date}"), "{text}");
    // Each file read is named (the session's path may be canonical, so its tail only); the
    // nearer AGENTS.md repeats crates/CLAUDE.md's text, which is kept once, where it came first.
    assert!(text.contains("crates/sub/CLAUDE.md\">"), "{text}");
    assert!(!text.contains("crates/sub/AGENTS.md\">"), "{text}");
    // Without a repository: the session's folder only.
    let alone = tempfile::tempdir().unwrap();
    let inner = alone.path().join("inner");
    std::fs::create_dir(&inner).unwrap();
    std::fs::write(alone.path().join("AGENTS.md"), "PARENT\n").unwrap();
    std::fs::write(inner.join("AGENTS.md"), "HERE\n").unwrap();
    let text = prompt_for(&inner);
    assert!(text.contains("HERE") && !text.contains("PARENT"), "{text}");
}

/// Hostile files: a symlink to a secret outside the project is not read, a FIFO does not
/// block, a huge file is cut at the bound with a line saying how to read the rest.
#[test]
fn instructions_are_bounded_and_never_read_through_symlinks_or_fifos() {
    let top = tempfile::tempdir().unwrap();
    let secret = top.path().join("secret");
    std::fs::write(&secret, "TOP-SECRET-VALUE\n").unwrap();
    let repo = top.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::os::unix::fs::symlink(&secret, repo.join("AGENTS.md")).unwrap();
    let fifo = repo.join("CLAUDE.md");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let text = prompt_for(&repo);
    assert!(!text.contains("TOP-SECRET-VALUE"), "{text}");
    assert!(!text.contains("project's instructions"), "{text}");
    // A huge file: cut at the bound, at a line end, and said so.
    std::fs::remove_file(repo.join("AGENTS.md")).unwrap();
    let line = "Always run the linter before you commit anything at all.\n";
    std::fs::write(repo.join("AGENTS.md"), line.repeat(4000)).unwrap();
    let text = prompt_for(&repo);
    let kept = text.matches(line).count() * line.len();
    assert!(
        kept <= project_docs::MAX_INSTRUCTION_BYTES
            && kept > project_docs::MAX_INSTRUCTION_BYTES - line.len(),
        "{kept}"
    );
    assert!(
        text.contains("bounded to 32 KiB") && text.contains(&format!("tail -c +{}", kept + 1)),
        "{}",
        &text[text.len() - 400..]
    );
}

/// A reply whose tool call is cut off by the token limit (`finish_reason: length`, arguments
/// unfinished): nothing runs, the call is answered with the hint, and the next request has
/// twice the budget; the turn goes on to its answer.
#[tokio::test]
async fn a_reply_cut_off_by_the_token_limit_runs_nothing_and_gets_a_larger_budget() {
    let cut: Vec<String> = openai::events(
        &[],
        &[],
        &[(
            "c1",
            "bash",
            &["{\"command\":\"cat > big.txt <<'EOF'\\nline"],
        )],
    )
    .into_iter()
    .map(|e| {
        e.replace(
            "\"finish_reason\":\"tool_calls\"",
            "\"finish_reason\":\"length\"",
        )
    })
    .collect();
    assert!(cut.iter().any(|e| e.contains("\"length\"")));
    let fake = FakeModel::start(vec![
        Answer::Sse(cut),
        openai::reply(&["I will write it in parts."], &[]),
    ])
    .await;
    let host = Host::new();
    let driver = ModelDriver::new(config(Provider::OpenAi, &fake.base));
    host.turn(&driver, &prompt("write a big file"))
        .await
        .unwrap();
    let events = host.take_events();
    assert!(
        !events.iter().any(|e| matches!(e, Event::Call(_))),
        "{events:?}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].body["max_tokens"], 8192);
    assert_eq!(requests[1].body["max_tokens"], 16384);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let answer = messages.last().unwrap();
    assert_eq!(answer["role"], "tool");
    assert_eq!(answer["tool_call_id"], "c1");
    let hint = answer["content"].as_str().unwrap();
    assert!(
        hint.contains("cut off by its token limit (8192 tokens)")
            && hint.contains("up to 16384 tokens")
            && hint.contains("cat >>"),
        "{hint}"
    );
    assert!(!host.dir.path().join("big.txt").exists());
}
