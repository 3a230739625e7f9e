//! The sandbox modes over ACP: offered on `session/new`, switched by `session/set_mode`, and the
//! switch changes what the session's next command may do. Real binary, real sandbox.

use acp_bash::acp::client::{AcpClient, ClientProfile, Conversation};
use agent_client_protocol::v1::schema::{SessionId, SetSessionModeRequest, StopReason};
use serde_json::Value;

use crate::support::acp::*;

/// A workspace outside the temp dir (which every mode may write), so that read-only shows.
fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::Builder::new()
        .prefix("acp-bash-modes-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    (tmp, dir)
}

/// A plain client for the agent with its default sandbox mode (no `--sandbox` flag).
fn default_mode_client() -> AcpClient {
    AcpClient::new(binary(), ["serve", "--log-level", "acp_bash=debug"])
        .profile(ClientProfile::Plain)
}

async fn set_mode(
    c: &Conversation,
    session: &SessionId,
    mode: &str,
) -> agent_client_protocol::Result<()> {
    c.connection()
        .send_request(SetSessionModeRequest::new(
            session.clone(),
            mode.to_string(),
        ))
        .block_task()
        .await?;
    Ok(())
}

/// The console block of a prompt's final update (the plain client's view of the result).
async fn run(c: &mut Conversation, session: &SessionId, script: &str) -> String {
    let turn = c.prompt(session, script).await.unwrap();
    assert_eq!(turn.stop_reason, StopReason::EndTurn);
    console_block(&turn.updates)
}

/// The `result` of the response to the first request with `method`.
fn response_to(lines: &[String], method: &str) -> Value {
    let parsed: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(&l[3..]).unwrap())
        .collect();
    let id = parsed
        .iter()
        .find(|v| v["method"] == method)
        .expect("the request")["id"]
        .clone();
    parsed
        .iter()
        .find(|v| v["id"] == id && v.get("method").is_none())
        .expect("its response")["result"]
        .clone()
}

#[tokio::test]
async fn session_new_offers_the_three_sandbox_modes_with_workspace_selected() {
    let (_tmp, dir) = temp_dir();
    let client = default_mode_client();
    let transcript = client.transcript();
    guard(
        "session/new",
        client.run(async |mut c| c.new_session(&dir).await),
    )
    .await
    .unwrap();
    let lines = transcript.lines();
    validate_wire(&lines);
    let modes = &response_to(&lines, "session/new")["modes"];
    assert_eq!(modes["currentModeId"], "workspace");
    let ids: Vec<&str> = modes["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["workspace", "read-only", "full"]);
    for mode in modes["availableModes"].as_array().unwrap() {
        let description = mode["description"].as_str().unwrap();
        let name = mode["name"].as_str().unwrap();
        assert!(!name.is_empty());
        // The words themselves are pinned, as literals, by the `workspace__*` transcript
        // snapshots (which keep the real descriptions); here: each is a sentence of what the
        // mode allows that does not repeat the mode's name (the picker shows the name already).
        assert!(
            description.starts_with("Commands ")
                && !description.to_lowercase().contains(&name.to_lowercase())
                && description.ends_with('.'),
            "{description}"
        );
    }
}

#[tokio::test]
async fn switching_modes_changes_what_the_next_command_may_do() {
    let (_tmp, dir) = workspace();
    let client = default_mode_client();
    let transcript = client.transcript();
    guard(
        "modes",
        client.run(async |mut c| {
            let session = c.new_session(&dir).await?;
            let written = run(
                &mut c,
                &session,
                "echo one > in-workspace && cat in-workspace",
            )
            .await;
            assert!(written.contains("one\n[exit code: 0]"), "{written}");

            set_mode(&c, &session, "read-only").await?;
            let denied = run(&mut c, &session, "echo two > denied").await;
            assert!(denied.contains("[exit code: 1]"), "{denied}");
            assert!(
                denied.contains("Permission denied") || denied.contains("Read-only"),
                "{denied}"
            );
            let temp = run(
                &mut c,
                &session,
                "f=$(mktemp) && echo ok > \"$f\" && cat \"$f\" && rm \"$f\"",
            )
            .await;
            assert!(
                temp.contains("ok\n[exit code: 0]"),
                "the temp dir stays writable: {temp}"
            );

            set_mode(&c, &session, "workspace").await?;
            let again = run(
                &mut c,
                &session,
                "echo three > allowed-again && cat allowed-again",
            )
            .await;
            assert!(again.contains("three\n[exit code: 0]"), "{again}");
            Ok(())
        }),
    )
    .await
    .unwrap();
    assert!(!dir.join("denied").exists());
    validate_wire(&transcript.lines());
}

#[tokio::test]
async fn an_unknown_mode_or_session_is_refused_and_the_connection_keeps_working() {
    let (_tmp, dir) = temp_dir();
    let client = default_mode_client();
    let transcript = client.transcript();
    guard(
        "bad set_mode",
        client.run(async |mut c| {
            let session = c.new_session(&dir).await?;
            let error = set_mode(&c, &session, "yolo").await.unwrap_err();
            assert!(error.message.contains("unknown mode \"yolo\""), "{error:?}");
            assert!(
                error.message.contains("workspace, read-only, full"),
                "{error:?}"
            );
            let error = set_mode(&c, &SessionId::new("nope"), "full")
                .await
                .unwrap_err();
            assert!(error.message.contains("unknown session"), "{error:?}");
            let still = run(&mut c, &session, "echo still here").await;
            assert!(still.contains("still here"), "{still}");
            Ok(())
        }),
    )
    .await
    .unwrap();
    validate_wire(&transcript.lines());
}

#[tokio::test]
async fn off_is_refused_unless_the_agent_was_started_with_it() {
    let (_tmp, dir) = temp_dir();
    let client = default_mode_client();
    guard(
        "off refused",
        client.run(async |mut c| {
            let session = c.new_session(&dir).await?;
            let error = set_mode(&c, &session, "off").await.unwrap_err();
            assert!(
                error.message.contains("only by whoever starts the agent"),
                "{error:?}"
            );
            assert!(error.message.contains("--sandbox off"), "{error:?}");
            // Still in its PID namespace, where the shell is PID 2.
            let pid_ns = run(&mut c, &session, "echo $$").await;
            assert!(pid_ns.starts_with("```console\n2\n"), "{pid_ns}");
            Ok(())
        }),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn started_with_off_a_session_offers_off_and_can_go_back_to_it() {
    let (_tmp, dir) = workspace();
    let client = AcpClient::new(binary(), ["--sandbox", "off"]).profile(ClientProfile::Plain);
    let transcript = client.transcript();
    guard(
        "off offered",
        client.run(async |mut c| {
            let session = c.new_session(&dir).await?;
            // No PID namespace: the shell's pid is the host's, not 2.
            let pid = run(&mut c, &session, "echo $$").await;
            assert!(!pid.starts_with("```console\n2\n"), "{pid}");
            set_mode(&c, &session, "read-only").await?;
            let denied = run(&mut c, &session, "touch denied").await;
            assert!(denied.contains("[exit code: 1]"), "{denied}");
            set_mode(&c, &session, "off").await?;
            let allowed = run(&mut c, &session, "touch allowed && echo made").await;
            assert!(allowed.contains("made\n[exit code: 0]"), "{allowed}");
            Ok(())
        }),
    )
    .await
    .unwrap();
    assert!(!dir.join("denied").exists());
    assert!(dir.join("allowed").exists());
    let lines = transcript.lines();
    let created = response_to(&lines, "session/new");
    assert_eq!(created["modes"]["currentModeId"], "off");
    let ids: Vec<&str> = created["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["workspace", "read-only", "full", "off"]);
    validate_wire(&lines);
}

#[tokio::test]
async fn the_mode_messages_transcript() {
    let (_tmp, dir) = workspace();
    let client = default_mode_client();
    let recorded = client.transcript();
    guard(
        "mode transcript",
        client.run(async |mut c| {
            let session = c.new_session(&dir).await?;
            set_mode(&c, &session, "read-only").await?;
            run(&mut c, &session, "touch read-only-file").await;
            Ok(())
        }),
    )
    .await
    .unwrap();
    let lines = recorded.lines();
    validate_wire(&lines);
    let normalized = normalize_transcript(&lines, &dir);
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("plain__sandbox_modes", normalized.join("\n"));
    });
}
