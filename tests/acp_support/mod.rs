//! Helpers shared by the `acp_*` and `cli_*` integration tests: a client over the real binary,
//! hang guards, and readers for the updates a turn produced.
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use acp_bash::acp::client::{AcpClient, ClientProfile};
use agent_client_protocol::v1::schema::{
    ContentBlock, SessionUpdate, ToolCall, ToolCallContent, ToolCallUpdate,
};
use serde_json::Value;

/// The binary under test.
pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_acp-bash"))
}

/// A client for the real binary, serving on stdio, logging at debug level to its stderr.
pub fn client(profile: ClientProfile) -> AcpClient {
    AcpClient::new(binary(), ["serve", "--log-level", "acp_bash=debug"]).profile(profile)
}

/// A hang guard: generous, never a timing assertion.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

pub async fn guard<T>(what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(HANG_GUARD, future).await {
        Ok(value) => value,
        Err(_) => panic!("{what}: still not done after {HANG_GUARD:?}"),
    }
}

/// A fresh directory, canonical (so that paths in transcripts compare exactly).
pub fn temp_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().canonicalize().expect("canonical temp dir");
    (dir, path)
}

pub fn tool_call(updates: &[SessionUpdate]) -> &ToolCall {
    updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCall(call) => Some(call),
            _ => None,
        })
        .expect("a tool_call")
}

pub fn tool_call_updates(updates: &[SessionUpdate]) -> Vec<&ToolCallUpdate> {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCallUpdate(update) => Some(update),
            _ => None,
        })
        .collect()
}

/// The `data` of every `terminal_output` update, in order.
pub fn output_chunks(updates: &[SessionUpdate]) -> Vec<String> {
    tool_call_updates(updates)
        .into_iter()
        .filter_map(|u| {
            u.meta
                .as_ref()?
                .get("terminal_output")?
                .get("data")?
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// Everything streamed to the card.
pub fn card_output(updates: &[SessionUpdate]) -> String {
    output_chunks(updates).concat()
}

/// The update that carries the status.
pub fn final_update(updates: &[SessionUpdate]) -> &ToolCallUpdate {
    tool_call_updates(updates)
        .into_iter()
        .rfind(|u| u.fields.status.is_some())
        .expect("a final update with a status")
}

pub fn status(update: &ToolCallUpdate) -> String {
    serde_json::to_value(update.fields.status)
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

pub fn terminal_exit(update: &ToolCallUpdate) -> Option<Value> {
    update.meta.as_ref()?.get("terminal_exit").cloned()
}

/// The text blocks of a content list.
pub fn texts(content: &[ToolCallContent]) -> Vec<String> {
    content
        .iter()
        .filter_map(|c| match c {
            ToolCallContent::Content(c) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The console block of a fallback call's final update.
pub fn console_block(updates: &[SessionUpdate]) -> String {
    let update = final_update(updates);
    texts(
        update
            .fields
            .content
            .as_deref()
            .expect("fallback final update has content"),
    )
    .into_iter()
    .last()
    .expect("a console block")
}

/// Waits until `path` exists (the scripts signal progress by creating files).
pub async fn wait_for_file(path: &Path) {
    guard(&format!("waiting for {}", path.display()), async {
        while !path.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// Whether a process with this pid still exists (zombies count as gone).
pub fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// Waits (bounded) until the process is gone; false if it is still alive after 10 s.
pub async fn wait_until_gone(pid: i32) -> bool {
    for _ in 0..1000 {
        if !process_alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}
