//! Prompts of one session run one after another, in the order they were sent, each in the
//! working directory the previous one left (README: "prompts of one session run in order").

use std::time::{Duration, Instant};

use acp_bash::acp::client::ClientProfile;
use agent_client_protocol::v1::schema::{SessionUpdate, StopReason};

use crate::support::acp::*;

/// How long the second prompt gets to show that it runs early. Only a window for catching the
/// bug: with the per-session order intact nothing can happen in it, however slow the machine.
const EARLY_WINDOW: Duration = Duration::from_secs(2);

/// The first prompt `cd`s and then blocks until the test creates `go`; the second one is sent
/// while the first still runs. The second must not start before the first ends: it must not
/// write `order` during the window, it must see the first one's `cd`, and its `tool_call` must
/// come after the first one's final update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_second_prompt_waits_for_the_first() {
    let (_tmp, dir) = temp_dir();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let order = dir.join("order");
    let go = dir.join("go");
    let first_script = format!(
        "cd sub; while [ ! -e {go} ]; do sleep 0.01; done; echo one >> {order}",
        go = go.display(),
        order = order.display()
    );
    let second_script = format!("echo two >> {}; pwd", order.display());
    let (ran_early, stops, updates) = converse(
        ClientProfile::Zed,
        "one session, two prompts",
        async |mut c| {
            let session = c.new_session(&dir).await?;
            let first = c.start_prompt(&session, &first_script).block_task();
            let mut updates = Vec::new();
            // The first prompt's command is running once its tool_call arrived.
            while !updates
                .iter()
                .any(|u| matches!(u, SessionUpdate::ToolCall(_)))
            {
                updates.push(c.next_update().await.expect("an update").update);
            }
            let second = c.start_prompt(&session, &second_script).block_task();
            let window_ends = Instant::now() + EARLY_WINDOW;
            while !order.exists() && Instant::now() < window_ends {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let ran_early = order.exists();
            std::fs::write(&go, "").unwrap();
            let stops = (first.await?.stop_reason, second.await?.stop_reason);
            // Both turns' updates, in the order they arrived: until two final updates are in.
            while tool_call_updates(&updates)
                .iter()
                .filter(|u| u.fields.status.is_some())
                .count()
                < 2
            {
                updates.push(c.next_update().await.expect("an update").update);
            }
            Ok((ran_early, stops, updates))
        },
    )
    .await;
    assert!(
        !ran_early,
        "the second prompt ran while the first was still running"
    );
    assert_eq!(stops, (StopReason::EndTurn, StopReason::EndTurn));
    assert_eq!(std::fs::read_to_string(&order).unwrap(), "one\ntwo\n");
    // The order of events on the wire: call 1, its final update, then call 2 and its output.
    let events: Vec<String> = updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCall(call) => Some(format!("call {}", call.tool_call_id.0)),
            SessionUpdate::ToolCallUpdate(update) => update
                .fields
                .status
                .map(|s| format!("final {} {s:?}", update.tool_call_id.0)),
            _ => None,
        })
        .collect();
    let ids: Vec<&str> = events
        .iter()
        .filter_map(|e| e.strip_prefix("call "))
        .collect();
    assert_eq!(ids.len(), 2, "{events:?}");
    assert_eq!(
        events,
        [
            format!("call {}", ids[0]),
            format!("final {} Completed", ids[0]),
            format!("call {}", ids[1]),
            format!("final {} Completed", ids[1]),
        ]
    );
    // The second command started where the first one's `cd` left the session.
    let second_updates: Vec<SessionUpdate> = updates
        .iter()
        .skip_while(
            |u| !matches!(u, SessionUpdate::ToolCall(c) if c.tool_call_id.0.as_ref() == ids[1]),
        )
        .cloned()
        .collect();
    assert_eq!(
        card_output(&second_updates),
        format!("{}\n", dir.join("sub").display())
    );
}
