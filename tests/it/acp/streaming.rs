//! Live output on the card path, over real pipes: output arrives while the command runs, a flood
//! is coalesced into few updates with nothing lost, and the streamed bytes are capped with a line
//! that says so.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use acp_bash::acp::client::ClientProfile;
use acp_bash::acp::stream::{cap_notice, StreamLimits};
use agent_client_protocol::v1::schema::StopReason;

use crate::support::acp::*;

/// The command prints a line, then blocks until the test creates a file: the line must reach the
/// client while the command is still running (no timing assumption: it waits for the event).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_streams_while_the_command_runs() {
    let (_tmp, dir) = temp_dir();
    let go = dir.join("go");
    let (updates, latency) = converse(ClientProfile::Zed, "live output", async |mut c| {
        let session = c.new_session(&dir).await?;
        let pending = c
            .start_prompt(
                &session,
                "echo \"first $(date +%s%N)\"; while [ ! -e go ]; do sleep 0.01; done; echo second",
            )
            .block_task();
        let mut updates = Vec::new();
        while card_output(&updates).is_empty() {
            updates.push(c.next_update().await.expect("an update").update);
        }
        let received = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        // The command is still blocked: no final update yet.
        assert!(tool_call_updates(&updates)
            .iter()
            .all(|u| u.fields.status.is_none()));
        std::fs::write(&go, "").unwrap();
        let response = pending.await?;
        assert_eq!(response.stop_reason, StopReason::EndTurn);
        // Everything the agent sent before its answer, the final update included (no quiet
        // period: the SDK keeps the wire's order).
        updates.extend(updates_already_here(&mut c));
        let printed: u128 = card_output(&updates).lines().next().unwrap()["first ".len()..]
            .parse()
            .unwrap();
        Ok((updates, received.as_nanos().saturating_sub(printed)))
    })
    .await;
    let output = card_output(&updates);
    assert!(output.starts_with("first "), "{output:?}");
    assert!(output.ends_with("second\n"), "{output:?}");
    assert_eq!(status(final_update(&updates)), "completed");
    eprintln!(
        "first line: printed -> received by the client in {} ms",
        latency / 1_000_000
    );
    // Only a hang guard (the machine is shared): liveness is proven above by the event order, and
    // the coalescer's flush-at-once rule is pinned by unit tests with a fake clock.
    assert!(
        latency < 10_000_000_000,
        "first line took {} ms",
        latency / 1_000_000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_is_coalesced_and_nothing_is_lost() {
    let (_tmp, dir) = temp_dir();
    let (updates, elapsed) = converse(ClientProfile::Zed, "flood", async |mut c| {
        let session = c.new_session(&dir).await?;
        let started = Instant::now();
        let turn = c.prompt(&session, "seq 1 200000").await?;
        Ok((turn.updates, started.elapsed()))
    })
    .await;
    let expected: String = (1..=200_000).map(|n| format!("{n}\n")).collect();
    let chunks = output_chunks(&updates);
    assert_eq!(
        chunks.concat(),
        expected,
        "the card got exactly what the command printed"
    );
    let limits = StreamLimits::default();
    let allowed = elapsed.as_millis() as usize / limits.min_interval.as_millis() as usize
        + expected.len() / limits.max_batch_bytes
        + 3;
    eprintln!(
        "{} bytes in {} updates over {elapsed:?} (at most {allowed} allowed)",
        expected.len(),
        chunks.len()
    );
    assert!(
        chunks.len() <= allowed,
        "{} updates for {} bytes in {elapsed:?}",
        chunks.len(),
        expected.len()
    );
    assert_eq!(status(final_update(&updates)), "completed");
}

/// A flood of colours and multi-byte text: no update ends inside an escape sequence or a character,
/// and the card Zed renders holds exactly what the command printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_colourful_flood_reaches_the_card_intact() {
    let (_tmp, dir) = temp_dir();
    let updates = converse(ClientProfile::Zed, "colourful flood", async |mut c| {
        let session = c.new_session(&dir).await?;
        let script =
            "for i in $(seq 1 20000); do printf '\\033[3%dm%d\\033[0m é✓\\n' $((i % 8)) $i; done";
        Ok(c.prompt(&session, script).await?.updates)
    })
    .await;
    let expected: String = (1..=20_000)
        .map(|i| format!("\x1b[3{}m{i}\x1b[0m é✓\n", i % 8))
        .collect();
    let zed = zed_replay(&updates);
    assert_eq!(zed.problems(), &[] as &[String]);
    let call = tool_call(&updates).tool_call_id.0.to_string();
    let card = zed.card(&call).expect("the card");
    assert!(
        card.output == expected,
        "the card shows exactly what was printed ({} vs {} bytes)",
        card.output.len(),
        expected.len()
    );
    assert_eq!(card.status, "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_stops_at_the_cap_and_the_card_says_so() {
    let (_tmp, dir) = temp_dir();
    let limits = StreamLimits::default();
    let updates = converse(ClientProfile::Zed, "cap", async |mut c| {
        let session = c.new_session(&dir).await?;
        // 5 MB of output, more than the 4 MiB that is streamed.
        Ok(c.prompt(&session, "head -c 5000000 /dev/zero | tr '\\0' a")
            .await?
            .updates)
    })
    .await;
    let streamed = card_output(&updates);
    let notice = cap_notice(&limits);
    assert_eq!(
        streamed.matches(&notice).count(),
        1,
        "the card says once that it stopped streaming"
    );
    let (data, after) = streamed.split_once(&notice).unwrap();
    // The output ended mid-line (no newline in it): the notice starts a line of its own.
    let data = data
        .strip_suffix("\r\n")
        .unwrap_or_else(|| panic!("the notice is not on a line of its own"));
    // Bounds on both sides, as literals: at most the 4 MiB cap, at least the cap less the
    // largest chunk the engine hands over (the one that would cross the cap is kept out whole):
    // up to 256 KiB waiting for the reader plus one 64 KiB read.
    assert!(
        data.len() <= 4 * 1024 * 1024,
        "{} bytes streamed",
        data.len()
    );
    assert!(
        data.len() >= 4 * 1024 * 1024 - (256 + 64) * 1024,
        "only {} bytes streamed before the cap",
        data.len()
    );
    assert!(data.bytes().all(|b| b == b'a'));
    // Then, once the command ended, where the whole output is.
    let path = after
        .strip_prefix("[acp-bash: full output: ")
        .and_then(|rest| rest.strip_suffix("]\r\n"))
        .unwrap_or_else(|| panic!("the card says where the full output is: {after:?}"));
    assert_eq!(std::fs::metadata(path).unwrap().len(), 5_000_000);
    std::fs::remove_file(path).unwrap();
    assert_eq!(status(final_update(&updates)), "completed");
}
