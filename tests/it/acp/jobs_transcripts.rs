//! Snapshot transcripts of the job commands, for a card client (Zed) and a plain one: `/bg` of a
//! job that keeps running, `/logs`, `/jobs`, `/kill`, then `/bg` of a job that ends by itself.
//! Every line is checked against the ACP schema, and the card transcript is replayed through
//! Zed's rules.
//!
//! Besides the usual normalisation, what varies between runs is replaced: the pid a message
//! names, and the PID and ELAPSED columns of `/jobs` (with the table's padding, which follows
//! their width).

use acp_bash::acp::client::{ClientProfile, Conversation};
use agent_client_protocol::v1::schema::{SessionId, SessionUpdate};
use regex::Regex;
use serde_json::Value;

use super::jobs::{has_final, updates_until};
use crate::support::acp::*;
use crate::support::zed_replay::ZedReplay;

/// The shell's own stderr goes nowhere: whether bash reports "Terminated" for the killed sleep
/// depends on timing, and the card must show the same every run.
const LONG_JOB: &str =
    "exec 2>/dev/null; for i in 1 2 3; do echo line $i; done; touch printed; exec sleep 600";
const SHORT_JOB: &str = "echo quick; exit 3";

async fn ask(c: &mut Conversation, session: &SessionId, text: &str) -> Vec<SessionUpdate> {
    c.prompt(session, text).await.unwrap().updates
}

/// Reads updates until `done` holds for them together with `so_far` (the turn's own updates
/// may already hold some that came right after its answer).
async fn until(
    c: &mut Conversation,
    session: &SessionId,
    so_far: Vec<SessionUpdate>,
    done: impl Fn(&[SessionUpdate]) -> bool,
) {
    if done(&so_far) {
        return;
    }
    updates_until(c, session, |more| done(&[so_far.as_slice(), more].concat())).await;
}

async fn conversation(c: &mut Conversation, dir: &std::path::Path, profile: ClientProfile) {
    let session = c.new_session(dir).await.unwrap();
    let started = ask(c, &session, &format!("/bg {LONG_JOB}")).await;
    // Everything the job prints is in before the next prompt goes out.
    if profile == ClientProfile::Zed {
        until(c, &session, started, |u| {
            card_output(u) == "line 1\nline 2\nline 3\n"
        })
        .await;
    } else {
        wait_for_file(&dir.join("printed")).await;
    }
    ask(c, &session, "/logs 1 2").await;
    ask(c, &session, "/jobs").await;
    ask(c, &session, "/kill 1").await;
    ask(c, &session, "/jobs").await;
    let started = ask(c, &session, &format!("/bg {SHORT_JOB}")).await;
    until(c, &session, started, has_final).await;
    ask(c, &session, "/logs %2").await;
}

/// The agent's message texts with the pid and the `/jobs` columns that vary made fixed.
fn normalize_message(text: &str) -> String {
    let pid = Regex::new(r"\(pid \d+\)").unwrap();
    let row =
        Regex::new(r"(?m)^(ID|\d+) {2,}(PID|\d+|-) {2,}(.+?) {2,}(ELAPSED|\S+) {2,}(.*)$").unwrap();
    let text = pid.replace_all(text, "(pid [PID])");
    row.replace_all(&text, |caps: &regex::Captures| {
        let header = &caps[1] == "ID";
        let (pid, elapsed) = if header {
            ("PID", "ELAPSED")
        } else {
            ("[PID]", "[ELAPSED]")
        };
        format!(
            "{} | {pid} | {} | {elapsed} | {}",
            &caps[1], &caps[3], &caps[5]
        )
    })
    .into_owned()
}

fn normalize(lines: &[String], dir: &std::path::Path) -> Vec<String> {
    normalize_transcript(lines, dir)
        .into_iter()
        .map(|line| {
            let (direction, json) = line.split_at(3);
            let mut value: Value = serde_json::from_str(json).unwrap();
            if let Some(text) = value.pointer_mut("/params/update/content/text") {
                if let Some(message) = text.as_str() {
                    *text = Value::String(normalize_message(message));
                }
            }
            format!("{direction}{value}")
        })
        .collect()
}

async fn transcript(profile: ClientProfile, name: &str) {
    let (_tmp, dir) = temp_dir();
    let client = client(profile);
    let recorded = client.transcript();
    guard(
        name,
        client.run(async |mut c| {
            conversation(&mut c, &dir, profile).await;
            Ok(())
        }),
    )
    .await
    .unwrap();
    let lines = recorded.lines();
    validate_wire(&lines);
    if profile == ClientProfile::Zed {
        let mut zed = ZedReplay::default();
        for line in lines.iter().filter_map(|l| l.strip_prefix("<- ")) {
            zed.apply_message(&serde_json::from_str(line).unwrap());
        }
        assert_eq!(zed.problems(), &[] as &[String]);
        let long = zed.card("call-1-1").expect("the first job's card");
        // Killed by /kill: the card ends with how (issue 21, point 4).
        assert_eq!(
            long.output,
            "line 1\nline 2\nline 3\n[cancelled] [killed by signal: SIGTERM]\r\n"
        );
        assert_eq!(long.signal.as_deref(), Some("SIGTERM"));
        let short = zed.card("call-1-2").expect("the second job's card");
        assert_eq!(
            (short.output.as_str(), short.exit_code),
            ("quick\n", Some(3))
        );
    }
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!(name, normalize(&lines, &dir).join("\n"));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zed_jobs() {
    transcript(ClientProfile::Zed, "zed__jobs").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_jobs() {
    transcript(ClientProfile::Plain, "plain__jobs").await;
}

#[test]
fn the_varying_columns_are_replaced_and_the_rest_kept() {
    let text = "2 jobs of this session (1 running):\n\n```text\nID  PID    STATE              ELAPSED  COMMAND\n1   12345  killed by SIGTERM  1m05s    sleep 600\n2   -      exited 3           850ms    echo quick; exit 3\n```\nStarted job 2 (pid 99).";
    assert_eq!(
        normalize_message(text),
        "2 jobs of this session (1 running):\n\n```text\nID | PID | STATE | ELAPSED | COMMAND\n1 | [PID] | killed by SIGTERM | [ELAPSED] | sleep 600\n2 | [PID] | exited 3 | [ELAPSED] | echo quick; exit 3\n```\nStarted job 2 (pid [PID])."
    );
}
