//! Snapshot transcripts: a client drives the real binary over real pipes and records every
//! JSON-RPC line. One transcript per (client, script), stored in `snapshots/` at the repo root.
//!
//! Every line of every transcript is validated against the ACP v1 schema, and every card
//! transcript is replayed through Zed's rules: the card must show exactly what the command printed
//! (then, for a command that did not simply exit, the status line).

use std::path::Path;

use acp_bash::acp::client::{ClientProfile, Conversation};
use agent_client_protocol::v1::schema::{SessionUpdate, StopReason};
use serde_json::Value;

use crate::support::acp::*;
use crate::support::zed_replay::ZedReplay;

/// A script: the prompts sent in one session, and what each prints (`[TMP]` = the session's dir).
struct Script {
    name: &'static str,
    prompts: &'static [&'static str],
    printed: &'static [&'static str],
    /// Cancel the (only) prompt once it has printed and created the file `started`.
    cancel: bool,
    /// The (only) prompt waits for the file `go`: create it once the client shows this text
    /// while the command runs (the card's output, or a live console view).
    live: Option<&'static str>,
}

const SUCCESS: Script = Script {
    name: "success",
    prompts: &["echo hello"],
    printed: &["hello\n"],
    cancel: false,
    live: None,
};

const FAILURE: Script = Script {
    name: "failure",
    prompts: &["echo 'error: no such thing' >&2; exit 3"],
    printed: &["error: no such thing\n"],
    cancel: false,
    live: None,
};

const MULTI_LINE: Script = Script {
    name: "multi_line_with_description",
    prompts: &["# Make two files and list them\nmkdir -p out\ntouch out/a out/b\nls out"],
    printed: &["a\nb\n"],
    cancel: false,
    live: None,
};

const CD_THEN_PWD: Script = Script {
    name: "cd_then_pwd",
    prompts: &["mkdir -p sub && cd sub", "pwd"],
    printed: &["", "[TMP]/sub\n"],
    cancel: false,
    live: None,
};

const COLOURS: Script = Script {
    name: "colours_and_utf8",
    prompts: &["printf '\\033[1;32mgreen ✓\\033[0m naïve café — 日本語 🚀\\n'"],
    printed: &["\x1b[1;32mgreen ✓\x1b[0m naïve café — 日本語 🚀\n"],
    cancel: false,
    live: None,
};

const CANCELLED: Script = Script {
    name: "cancelled_sleep",
    // `exec`: the shell becomes the sleep, so what the kill leaves behind does not depend on
    // whether bash reports its child's death before acting on its own SIGTERM.
    prompts: &["echo started; touch started; exec sleep 60"],
    printed: &["started\n"],
    cancel: true,
    live: None,
};

const LIVE: Script = Script {
    name: "live_then_wait",
    prompts: &["# Count, then wait\nseq 1 25\nwhile [ ! -e go ]; do sleep 0.01; done"],
    printed: &["1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n21\n22\n23\n24\n25\n"],
    cancel: false,
    live: Some("\n25\n"),
};

const LONG_FAILURE: Script = Script {
    name: "long_failure",
    prompts: &["seq 1 40; exit 3"],
    printed: &["1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n21\n22\n23\n24\n25\n26\n27\n28\n29\n30\n31\n32\n33\n34\n35\n36\n37\n38\n39\n40\n"],
    cancel: false,
    live: None,
};

fn profile_name(profile: ClientProfile) -> &'static str {
    match profile {
        ClientProfile::Zed => "zed",
        ClientProfile::Plain => "plain",
        ClientProfile::TerminalOnly => "terminal_only",
        ClientProfile::Compaction => "compaction",
    }
}

async fn prompt(c: &mut Conversation, script: &Script, dir: &Path, profile: ClientProfile) {
    let session = c.new_session(dir).await.unwrap();
    if script.cancel {
        let pending = c.start_prompt(&session, script.prompts[0]).block_task();
        // Everything the agent sends before the cancel (the tool_call; on the card, all of the
        // output) is in before the cancel goes out, so the transcript's order is fixed.
        let mut updates: Vec<SessionUpdate> = Vec::new();
        loop {
            let called = updates
                .iter()
                .any(|u| matches!(u, SessionUpdate::ToolCall(_)));
            let printed =
                profile != ClientProfile::Zed || card_output(&updates) == script.printed[0];
            if called && printed {
                break;
            }
            updates.push(c.next_update().await.expect("an update").update);
        }
        wait_for_file(&dir.join("started")).await;
        // The shell has become the `sleep`: a cancel that lands while bash is still on its way
        // to the `exec` is caught by bash's TERM handler (it has one while the prelude's EXIT
        // trap is set) and lost with the exec; the run would then end by the SIGKILL after the
        // grace instead of by the TERM (a busy machine makes that window wide).
        wait_for_exec(&["sleep", "60"], dir).await;
        c.cancel(&session).unwrap();
        assert_eq!(pending.await.unwrap().stop_reason, StopReason::Cancelled);
    } else if let Some(shown) = script.live {
        let pending = c.start_prompt(&session, script.prompts[0]).block_task();
        let mut updates: Vec<SessionUpdate> = Vec::new();
        let live = |updates: &[SessionUpdate]| {
            card_output(updates).contains(shown)
                || console_views(updates).iter().any(|v| v.contains(shown))
        };
        while !live(&updates) {
            updates.push(c.next_update().await.expect("an update").update);
        }
        std::fs::write(dir.join("go"), "").unwrap();
        assert_eq!(pending.await.unwrap().stop_reason, StopReason::EndTurn);
    } else {
        for text in script.prompts {
            assert_eq!(
                c.prompt(&session, text).await.unwrap().stop_reason,
                StopReason::EndTurn
            );
        }
    }
}

async fn transcript(profile: ClientProfile, script: Script) {
    transcript_in(profile, script, Sandbox::Full).await;
}

/// The sandbox mode the agent starts sessions in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sandbox {
    /// `--sandbox full`: the protocol transcripts (the same on every machine).
    Full,
    /// No `--sandbox` flag: the default mode (`workspace`), as an editor starts the agent. Its
    /// transcripts keep the modes' real descriptions, which are the same on every machine where
    /// every layer works and the agent runs as root (as in CI); elsewhere they are skipped.
    Default,
}

async fn transcript_in(profile: ClientProfile, script: Script, sandbox: Sandbox) {
    let (_tmp, dir) = temp_dir();
    let client = match sandbox {
        Sandbox::Full => client(profile),
        Sandbox::Default => {
            if !every_layer_as_root() {
                return;
            }
            acp_bash::acp::client::AcpClient::new(
                binary(),
                ["serve", "--log-level", "acp_bash=debug"],
            )
            .profile(profile)
        }
    };
    let recorded = client.transcript();
    guard(
        script.name,
        client.run(async |mut c| {
            prompt(&mut c, &script, &dir, profile).await;
            Ok(())
        }),
    )
    .await
    .unwrap();
    let lines = recorded.lines();

    validate_wire(&lines);
    if profile == ClientProfile::Zed {
        let printed: Vec<String> = script
            .printed
            .iter()
            .map(|p| p.replace("[TMP]", dir.to_str().unwrap()))
            // A cancelled command's card ends with how it ended, in a plain client's words
            // (issue 21, point 4).
            .map(|p| match script.cancel {
                true => format!("{p}[cancelled] [killed by signal: SIGTERM]\r\n"),
                false => p,
            })
            .collect();
        assert_cards_show_what_was_printed(&lines, &printed);
    }

    // Whether a quick command gets a live console view before its final update depends on
    // timing: only the scripts that wait for one keep theirs.
    let keep_live = script.live.is_some();
    let (normalized, name) = match sandbox {
        // The one transcript that pins the advertised command list (the others redact it).
        Sandbox::Full if profile == ClientProfile::Zed && script.name == "success" => (
            normalize_keeping_commands(&lines, &dir, keep_live, false),
            format!("{}__{}", profile_name(profile), script.name),
        ),
        Sandbox::Full => (
            normalize_with(&lines, &dir, keep_live, false),
            format!("{}__{}", profile_name(profile), script.name),
        ),
        Sandbox::Default => (
            normalize_with(&lines, &dir, keep_live, true),
            format!("workspace__{}__{}", profile_name(profile), script.name),
        ),
    };
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(name, normalized.join("\n"));
    });
}

/// Whether the default-mode transcripts can run here: root, and every layer their mode
/// descriptions mention (a skip is listed, and fails CI where doctor reports the layer working).
#[cfg(target_os = "linux")]
fn every_layer_as_root() -> bool {
    use crate::support::skip::{root, skip_unless, ROOT};
    let s = acp_bash::sandbox::Support::current();
    skip_unless(ROOT, root())
        && skip_unless("Landlock filesystem rules", s.landlock.clone().map(|_| ()))
        && skip_unless("PID + mount namespaces", s.namespaces.clone())
        && skip_unless("private /proc", s.private_proc.clone())
        && skip_unless("network namespace", s.network_namespace.clone())
}

/// Elsewhere: the transcripts show Linux's sandbox (its texts and errors); they are skipped.
#[cfg(not(target_os = "linux"))]
fn every_layer_as_root() -> bool {
    crate::support::skip::skip_unless(
        "Linux kernel sandbox",
        Err("the default-mode transcripts record Linux's sandbox"),
    )
}

/// A write outside the session's folder, denied by the default mode.
const WRITE_OUTSIDE: Script = Script {
    name: "write_outside_the_workspace",
    prompts: &["touch /etc/acp-bash-denied-write"],
    printed: &["touch: cannot touch '/etc/acp-bash-denied-write': Read-only file system\n"],
    cancel: false,
    live: None,
};

macro_rules! default_mode_transcripts {
    ($($test:ident: $profile:expr, $script:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            transcript_in($profile, $script, Sandbox::Default).await;
        }
    )*};
}

default_mode_transcripts! {
    workspace_zed_success: ClientProfile::Zed, SUCCESS;
    workspace_zed_cd_then_pwd: ClientProfile::Zed, CD_THEN_PWD;
    workspace_zed_write_outside_the_workspace: ClientProfile::Zed, WRITE_OUTSIDE;
    workspace_plain_success: ClientProfile::Plain, SUCCESS;
    workspace_plain_write_outside_the_workspace: ClientProfile::Plain, WRITE_OUTSIDE;
    workspace_plain_cancelled_sleep: ClientProfile::Plain, CANCELLED;
}

/// Each `session/update` the agent sent, as JSON, in order.
fn updates(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|line| line.strip_prefix("<- "))
        .map(|json| serde_json::from_str::<Value>(json).unwrap())
        .filter(|value| value["method"] == "session/update")
        .map(|value| value["params"]["update"].clone())
        .collect()
}

fn assert_cards_show_what_was_printed(lines: &[String], printed: &[String]) {
    let updates = updates(lines);
    let calls: Vec<String> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .map(|u| u["toolCallId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(calls.len(), printed.len(), "one tool call per prompt");
    let cards = replay_cards(&updates, &calls);
    for ((call, card_output), expected) in calls.iter().zip(cards).zip(printed) {
        assert_eq!(
            &card_output, expected,
            "the card of {call} shows exactly what the command printed"
        );
    }
}

/// Replays the updates the way Zed applies them and returns each card's rendered output; the card
/// must exist, keep its terminal block, have exited, and Zed must have seen no problem.
fn replay_cards(updates: &[Value], calls: &[String]) -> Vec<String> {
    let mut zed = ZedReplay::default();
    for update in updates {
        zed.apply(update);
    }
    assert_eq!(
        zed.problems(),
        &[] as &[String],
        "Zed would show no problem"
    );
    calls
        .iter()
        .map(|call| {
            let card = zed.card(call).unwrap_or_else(|| panic!("Zed knows {call}"));
            assert!(
                card.has_terminal_block,
                "{call} still shows its card: {card:?}"
            );
            assert!(card.exited, "{call}'s card got its exit: {card:?}");
            assert_eq!(card.kind.as_deref(), Some("execute"));
            assert!(
                card.status == "completed" || card.status == "failed",
                "{card:?}"
            );
            card.output
        })
        .collect()
}

macro_rules! transcripts {
    ($($test:ident: $profile:expr, $script:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            transcript($profile, $script).await;
        }
    )*};
}

transcripts! {
    zed_success: ClientProfile::Zed, SUCCESS;
    zed_failure: ClientProfile::Zed, FAILURE;
    zed_multi_line_with_description: ClientProfile::Zed, MULTI_LINE;
    zed_cd_then_pwd: ClientProfile::Zed, CD_THEN_PWD;
    zed_colours_and_utf8: ClientProfile::Zed, COLOURS;
    zed_cancelled_sleep: ClientProfile::Zed, CANCELLED;
    zed_live_then_wait: ClientProfile::Zed, LIVE;
    zed_long_failure: ClientProfile::Zed, LONG_FAILURE;
    plain_live_then_wait: ClientProfile::Plain, LIVE;
    plain_long_failure: ClientProfile::Plain, LONG_FAILURE;
    plain_success: ClientProfile::Plain, SUCCESS;
    plain_failure: ClientProfile::Plain, FAILURE;
    plain_multi_line_with_description: ClientProfile::Plain, MULTI_LINE;
    plain_cd_then_pwd: ClientProfile::Plain, CD_THEN_PWD;
    plain_colours_and_utf8: ClientProfile::Plain, COLOURS;
    plain_cancelled_sleep: ClientProfile::Plain, CANCELLED;
    terminal_only_success: ClientProfile::TerminalOnly, SUCCESS;
    terminal_only_failure: ClientProfile::TerminalOnly, FAILURE;
    terminal_only_multi_line_with_description: ClientProfile::TerminalOnly, MULTI_LINE;
    terminal_only_cd_then_pwd: ClientProfile::TerminalOnly, CD_THEN_PWD;
    terminal_only_colours_and_utf8: ClientProfile::TerminalOnly, COLOURS;
    terminal_only_cancelled_sleep: ClientProfile::TerminalOnly, CANCELLED;
}
