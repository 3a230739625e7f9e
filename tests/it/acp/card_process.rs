//! The process in the card: `_meta.terminal_info` carries `pid` and `pgid` of the command as
//! the host sees them, so that a user can stop one command from outside (Zed's card has no stop
//! of its own). Through the built binary over real pipes, in a PID-namespaced mode and with
//! the sandbox off, as root and as an ordinary user: the pid is a live process of that command's
//! group while it runs, and SIGKILL to that group from outside ends the command.

use acp_bash::acp::client::{AcpClient, ClientProfile};
use agent_client_protocol::v1::schema::{SessionUpdate, StopReason};

use crate::support::acp::*;
use crate::support::sandbox::{as_root_and_nobody, require_namespaces};

/// A workspace an ordinary user may enter and write.
fn workspace() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("acpbash-pid-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// The process group of `pid` (field 5 of `/proc/PID/stat`).
fn pgrp_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(2)?
        .parse()
        .ok()
}

fn killing_the_cards_group_stops_the_command(mode: &str) {
    let ws = workspace();
    let dir = ws.path().canonicalize().unwrap();
    let name = process_name(&dir);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = AcpClient::new(binary(), ["serve", "--sandbox", mode, "--no-history"])
        .profile(ClientProfile::Zed);
    let script = format!("touch started && exec -a {name} sleep 1000");
    let (stop, transcript) =
        runtime.block_on(converse_with(client, "pid in the card", async |mut c| {
            let session = c.new_session(&dir).await?;
            let answer = c.start_prompt(&session, &script).block_task();
            tokio::pin!(answer);
            let info = loop {
                let notification = c.next_update().await.expect("an update");
                if let SessionUpdate::ToolCall(call) = notification.update {
                    break call.meta.expect("the card's _meta")["terminal_info"].clone();
                }
            };
            let pid = info["pid"].as_i64().expect("a pid") as i32;
            let pgid = info["pgid"].as_i64().expect("a pgid") as i32;
            assert_eq!(pid, pgid, "{info}");
            wait_for_file(&dir.join("started")).await;
            wait_for_process(&name).await;
            // The pid is a live process of this agent's command: it leads the group, and the
            // command (`sleep`, renamed) is in that group.
            assert!(process_alive(pid), "{info}");
            assert_eq!(pgrp_of(pid), Some(pgid));
            let sleepers = processes_named(&name);
            assert_eq!(sleepers.len(), 1, "{sleepers:?}");
            assert_eq!(
                pgrp_of(sleepers[0]),
                Some(pgid),
                "the command is in the card's group"
            );
            // Stopped from outside, by the card's group alone.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let stop = answer.await?.stop_reason;
            assert!(wait_until_no_process(&name).await, "the command is gone");
            Ok(stop)
        }));
    assert_eq!(stop, StopReason::EndTurn, "{mode}");
    let lines = transcript.lines();
    let ended = lines
        .iter()
        .rev()
        .find(|l| l.contains("terminal_exit"))
        .expect("the final update");
    assert!(ended.contains("\"signal\":\"SIGKILL\""), "{mode}: {ended}");
}

#[test]
fn the_cards_pid_is_the_command_and_killing_its_group_stops_it() {
    as_root_and_nobody(
        "acp::card_process::the_cards_pid_is_the_command_and_killing_its_group_stops_it",
        || {
            if !require_namespaces() {
                return;
            }
            killing_the_cards_group_stops_the_command("workspace");
        },
    );
}

#[test]
fn with_the_sandbox_off_the_cards_pid_is_the_shell() {
    as_root_and_nobody(
        "acp::card_process::with_the_sandbox_off_the_cards_pid_is_the_shell",
        || killing_the_cards_group_stops_the_command("off"),
    );
}

/// A `/bg` job's card carries the job's pid and pgid like a turn call's, the one the `/bg`
/// message names: a live process leading the group the job's command is in, and SIGKILL to that
/// group from outside ends the job (its card's final update says so).
fn killing_a_job_cards_group_stops_the_job(mode: &str) {
    let ws = workspace();
    let dir = ws.path().canonicalize().unwrap();
    let name = process_name(&dir);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = AcpClient::new(binary(), ["serve", "--sandbox", mode, "--no-history"])
        .profile(ClientProfile::Zed);
    let script = format!("/bg exec -a {name} sleep 1000");
    let ((), transcript) = runtime.block_on(converse_with(
        client,
        "pid in a job's card",
        async |mut c| {
            let session = c.new_session(&dir).await?;
            let turn = c.prompt(&session, &script).await?;
            assert_eq!(turn.stop_reason, StopReason::EndTurn);
            let said = crate::acp::jobs::message(&turn.updates);
            let info = tool_call(&turn.updates)
                .meta
                .as_ref()
                .expect("the job card's _meta")["terminal_info"]
                .clone();
            let pid = info["pid"].as_i64().expect("a pid") as i32;
            let pgid = info["pgid"].as_i64().expect("a pgid") as i32;
            assert_eq!(pid, pgid, "{info}");
            assert_eq!(pid, crate::acp::jobs::named_pid(&said), "{said}");
            wait_for_process(&name).await;
            assert!(process_alive(pid), "{info}");
            assert_eq!(pgrp_of(pid), Some(pgid));
            let sleepers = processes_named(&name);
            assert_eq!(sleepers.len(), 1, "{sleepers:?}");
            assert_eq!(pgrp_of(sleepers[0]), Some(pgid), "the job is in the group");
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            crate::acp::jobs::updates_until(&mut c, &session, crate::acp::jobs::has_final).await;
            assert!(wait_until_no_process(&name).await, "the job is gone");
            Ok(())
        },
    ));
    let lines = transcript.lines();
    let ended = lines
        .iter()
        .rev()
        .find(|l| l.contains("terminal_exit"))
        .expect("the job's final update");
    assert!(ended.contains("\"signal\":\"SIGKILL\""), "{mode}: {ended}");
}

#[test]
fn a_job_cards_pid_is_the_job_and_killing_its_group_stops_it() {
    as_root_and_nobody(
        "acp::card_process::a_job_cards_pid_is_the_job_and_killing_its_group_stops_it",
        || {
            if !require_namespaces() {
                return;
            }
            killing_a_job_cards_group_stops_the_job("workspace");
        },
    );
}

#[test]
fn with_the_sandbox_off_a_job_cards_pid_is_its_shell() {
    as_root_and_nobody(
        "acp::card_process::with_the_sandbox_off_a_job_cards_pid_is_its_shell",
        || killing_a_job_cards_group_stops_the_job("off"),
    );
}
