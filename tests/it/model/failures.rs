//! Provider failures and cancel: 429 / 5xx / a dropped stream are retried (honouring
//! `Retry-After`), a bounded number of times; 401 names the status and the variable; a context
//! overflow trims old output, then says so; cancel stops the stream and a running command at
//! once. The key is in no message, and the session stays usable after every error.

use std::time::{Duration, Instant};

use acp_bash::driver::model::{ModelDriver, Provider};
use acp_bash::driver::StopReason;
use acp_bash::CancellationToken;

use super::harness::{config, driver, prompt, said, Event, Host, KEY};
use crate::support::fake_model::{anthropic, openai, Answer, FakeModel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_server_errors_and_dropped_streams_are_retried() {
    let dropped = openai::events(&[], &["partial"], &[]);
    let fake = FakeModel::start(vec![
        openai::error(
            429,
            &[("retry-after", "1")],
            "Rate limit reached",
            "rate_limit_exceeded",
        ),
        openai::error(503, &[], "The server is overloaded", "server_error"),
        Answer::Drop(dropped[..2].to_vec()),
        openai::reply(&["Finally."], &[]),
    ])
    .await;
    let host = Host::new();
    let started = Instant::now();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("hi"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    // Retry-After: 1 was honoured (a lower bound: never flaky on a loaded machine).
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(fake.requests().len(), 4);
    assert!(said(&host.take_events()).ends_with("Finally."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_overloaded_529_and_error_events_are_retried() {
    let mut overloaded_mid_stream = anthropic::events(&[], &[], &[])[..2].to_vec();
    overloaded_mid_stream.push(
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
            .to_string(),
    );
    let fake = FakeModel::start(vec![
        anthropic::error(529, &[], "overloaded_error", "Overloaded"),
        Answer::Sse(overloaded_mid_stream),
        anthropic::reply(&["Up."], &[]),
    ])
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::Anthropic, &fake.base), &prompt("hi"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert_eq!(fake.requests().len(), 3);
    assert_eq!(said(&host.take_events()), "Up.");
}

/// Retries are bounded; the turn ends with a message; the next prompt works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_are_bounded_and_the_session_stays_usable() {
    let down = || openai::error(500, &[], "internal error", "server_error");
    let fake = FakeModel::start(vec![down(), down(), down(), openai::reply(&["Back."], &[])]).await;
    let mut config = config(Provider::OpenAi, &fake.base);
    config.retry.max_retries = 2;
    let driver = ModelDriver::new(config);
    let host = Host::new();
    let ended = host.turn(&driver, &prompt("hi")).await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert_eq!(fake.requests().len(), 3);
    let message = said(&host.take_events());
    assert!(message.contains("failed 3 times"), "{message}");
    assert!(message.contains("HTTP 500"), "{message}");
    assert_eq!(
        host.turn(&driver, &prompt("again")).await,
        Ok(StopReason::EndTurn)
    );
    assert_eq!(said(&host.take_events()), "Back.");
}

/// A Retry-After longer than acp-bash waits ends the turn at once, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_past_the_ceiling_is_not_waited_for() {
    let fake = FakeModel::start(vec![openai::error(
        429,
        &[("retry-after", "3600")],
        "slow down",
        "rate_limit",
    )])
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("hi"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    assert_eq!(fake.requests().len(), 1);
    let message = said(&host.take_events());
    assert!(message.contains("asked to wait 3600s"), "{message}");
}

/// 401 and 403 end the turn with the status and the variable the key came from; the key the
/// provider echoed is not in the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_names_the_status_and_the_variable_never_the_key() {
    let echo = format!("Incorrect API key provided: {KEY}.");
    let fake = FakeModel::start(vec![
        openai::error(401, &[], &echo, "invalid_api_key"),
        anthropic::error(403, &[], "permission_error", &echo),
    ])
    .await;
    let host = Host::new();
    let ended = host
        .turn(&driver(Provider::OpenAi, &fake.base), &prompt("hi"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let message = said(&host.take_events());
    assert!(message.contains("HTTP 401"), "{message}");
    assert!(message.contains("OPENAI_API_KEY"), "{message}");
    assert!(!message.contains(KEY), "{message}");
    assert!(message.contains("[redacted]"), "{message}");
    let ended = host
        .turn(&driver(Provider::Anthropic, &fake.base), &prompt("hi"))
        .await;
    assert_eq!(ended, Ok(StopReason::EndTurn));
    let message = said(&host.take_events());
    assert!(
        message.contains("HTTP 403") && message.contains("ANTHROPIC_API_KEY"),
        "{message}"
    );
    assert!(!message.contains(KEY), "{message}");
    assert_eq!(fake.requests().len(), 2, "auth errors are not retried");
}

/// An overflow asks the model for a summary first (`model::compaction`); when even that
/// overflows, old tool output is trimmed and the request tried again, and the user is told; an
/// overflow that trimming cannot cure says so clearly, and ends the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_overflow_trims_old_output_then_says_so() {
    let call = |id| openai::reply(&[], &[(id, "bash", &["{\"command\":\"seq 1 200\"}"])]);
    let overflow = || {
        openai::error(
            400,
            &[],
            "This model's maximum context length is 8192 tokens.",
            "context_length_exceeded",
        )
    };
    let fake = FakeModel::start(vec![
        call("c1"),
        call("c2"),
        call("c3"),
        overflow(),
        // The summary request overflows too.
        overflow(),
        openai::reply(&["Fits now."], &[]),
        overflow(),
        overflow(),
        overflow(),
    ])
    .await;
    let driver = driver(Provider::OpenAi, &fake.base);
    let host = Host::new();
    assert_eq!(
        host.turn(&driver, &prompt("big")).await,
        Ok(StopReason::EndTurn)
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 6);
    let retried = &requests[5].body["messages"];
    assert_eq!(
        retried[3]["content"],
        "[output removed to fit the context window]"
    );
    // The last two results are kept whole.
    for kept in [5, 7] {
        assert!(retried[kept]["content"]
            .as_str()
            .unwrap()
            .starts_with("1\n2\n"));
    }
    let told = said(&host.take_events());
    assert!(told.contains("[Compaction failed"), "{told}");
    assert!(
        told.contains("the output of old commands was removed"),
        "{told}"
    );
    assert!(told.ends_with("Fits now."), "{told}");
    // Nothing left to trim the next time: a clear message, no hang.
    assert_eq!(
        host.turn(&driver, &prompt("more")).await,
        Ok(StopReason::EndTurn)
    );
    let message = said(&host.take_events());
    assert!(
        message.contains("no longer fits the model's context window"),
        "{message}"
    );
}

/// Cancel while the model streams: the stream is dropped at once (the server sees the client
/// leave), and the turn ends cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_drops_the_models_stream_at_once() {
    let mut events = openai::events(&[], &["Thinking about it"], &[]);
    events.truncate(2);
    let fake = FakeModel::start(vec![Answer::Hang(events), openai::reply(&["Next."], &[])]).await;
    let driver = driver(Provider::OpenAi, &fake.base);
    let host = Host::new();
    let cancel = CancellationToken::new();
    let hi = prompt("hi");
    let (ended, ()) = tokio::join!(host.turn_with(&driver, &hi, cancel.clone()), async {
        // The text has arrived: the stream is open. Cancel it.
        host.wait_for(|e| matches!(e, Event::Message(_))).await;
        cancel.cancel();
        fake.client_left().await;
    });
    assert_eq!(ended, Ok(StopReason::Cancelled));
    assert_eq!(said(&host.take_events()), "Thinking about it");
    // The session is usable: the next prompt is answered.
    assert_eq!(
        host.turn(&driver, &prompt("again")).await,
        Ok(StopReason::EndTurn)
    );
    assert_eq!(said(&host.take_events()), "Next.");
}

/// Cancel while a command runs: it is killed, the calls after it never run, the turn ends
/// cancelled and no further model request is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_kills_the_running_command_and_asks_the_model_nothing_more() {
    let host = Host::new();
    let fifo = host.dir.path().join("up");
    crate::support::engine::mkfifo(&fifo);
    let command = format!("echo up > {}; sleep 600", fifo.display());
    let arguments = serde_json::json!({ "command": command }).to_string();
    let fake = FakeModel::start(vec![
        openai::reply(
            &[],
            &[
                ("c1", "bash", &[arguments.as_str()]),
                ("c2", "bash", &["{\"command\":\"touch never\"}"]),
            ],
        ),
        openai::reply(&["unused"], &[]),
    ])
    .await;
    let driver = driver(Provider::OpenAi, &fake.base);
    let cancel = CancellationToken::new();
    let wait = prompt("wait");
    let (ended, ()) = tokio::join!(host.turn_with(&driver, &wait, cancel.clone()), async {
        // The command is running once it has written to the fifo.
        let fifo = fifo.clone();
        tokio::task::spawn_blocking(move || std::fs::read_to_string(fifo).unwrap())
            .await
            .unwrap();
        cancel.cancel();
    });
    assert_eq!(ended, Ok(StopReason::Cancelled));
    assert_eq!(fake.requests().len(), 1);
    assert!(!host.dir.path().join("never").exists());
    let events = host.take_events();
    assert!(events.contains(&Event::Call(command.clone())));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::CallEnd(text) if text.contains("[cancelled]"))),
        "{events:?}"
    );
    // Both calls are answered in the conversation (the second as not run).
    let conversation = driver.conversation("s1");
    assert_eq!(conversation.len(), 4, "{conversation:?}");
}
