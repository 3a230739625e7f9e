//! The defaults README and `--help` promise, written here as literal values: changing one in the
//! code (a 60 s timeout, a one-day log retention, a 2 MiB stream cap) fails a test here.
//!
//! README: "default `10m`" timeout, logs "pruned after 7 days", streaming "stops with a notice
//! after 4 MiB", "at most ~50 updates a second", `workspace` the default mode, log level `warn`;
//! the engine keeps 32 KiB of head and 32 KiB of tail of a long output.

use std::process::Command;
use std::time::{Duration, SystemTime};

use acp_bash::acp::stream::{cap_notice, StreamLimits};
use acp_bash::exec::{logdir, Engine, EngineConfig};
use acp_bash::sandbox::Mode;

use crate::support::engine::run;

const MINUTE: u64 = 60;
const DAY: u64 = 24 * 60 * MINUTE;

#[test]
fn help_states_the_defaults() {
    let output = Command::new(crate::support::acp::binary())
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(help.contains("(default 10m)"), "{help}");
    assert!(help.contains("the default is warn"), "{help}");
}

#[test]
fn the_engine_defaults_are_the_documented_ones() {
    let config = EngineConfig::default();
    assert_eq!(config.default_timeout, Duration::from_secs(10 * MINUTE));
    assert_eq!(config.keep_head_bytes, 32_768);
    assert_eq!(config.keep_tail_bytes, 32_768);
    assert_eq!(config.sandbox_mode, Mode::Workspace);
    assert!(config.env.scrub);
}

#[test]
fn the_stream_limits_are_the_documented_ones() {
    let limits = StreamLimits::default();
    assert_eq!(limits.max_streamed_bytes, 4_194_304);
    assert_eq!(limits.min_interval, Duration::from_millis(20)); // ~50 updates a second
    assert_eq!(limits.max_batch_bytes, 65_536);
    assert_eq!(
        cap_notice(&limits),
        "[acp-bash: stopped streaming after 4 MiB; the result keeps only the head and tail of \
         the output; where the full output is follows when the command ends]\r\n"
    );
}

/// Logs are kept 7 days: one a minute younger stays, one a minute older goes (and files that
/// are not logs are never touched).
#[test]
fn logs_are_kept_for_seven_days() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("logs");
    logdir::prepare(&dir).unwrap();
    let now = SystemTime::now();
    let aged = |name: &str, age: u64| {
        let file = logdir::create_log(&dir.join(name)).unwrap();
        file.set_modified(now - Duration::from_secs(age)).unwrap();
    };
    aged("run-young.log", 7 * DAY - MINUTE);
    aged("run-six-days.log", 6 * DAY);
    aged("run-old.log", 7 * DAY + MINUTE);
    aged("run-ancient.log", 30 * DAY);
    aged("keep-me.txt", 30 * DAY);
    logdir::prepare(&dir).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["keep-me.txt", "run-six-days.log", "run-young.log"]);
}

/// A long output keeps exactly 32 KiB from its start and 32 KiB from its end.
#[tokio::test]
async fn a_long_output_keeps_32_kib_of_head_and_of_tail() {
    let logs = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let engine = Engine::new(EngineConfig::default().log_dir(logs.path().join("logs")));
    let session = engine.session(ws.path()).unwrap();
    session.set_mode(Mode::Full); // the capture is the same in every mode
    let outcome = run(
        &session,
        "head -c 40000 /dev/zero | tr '\\0' h; head -c 30000 /dev/zero | tr '\\0' m; \
         head -c 40000 /dev/zero | tr '\\0' t",
    )
    .await;
    let expected = format!(
        "{}\n[… 44464 bytes of output dropped here …]\n{}",
        "h".repeat(32_768),
        "t".repeat(32_768)
    );
    assert!(
        outcome.output == expected,
        "head/tail: {} bytes, starts {:?}",
        outcome.output.len(),
        &outcome.output[..40]
    );
    let truncation = outcome.status.truncation.expect("a truncation");
    assert_eq!(truncation.dropped_bytes, 44_464);
    let log = truncation.full_output.expect("a log");
    assert_eq!(std::fs::metadata(&log).unwrap().len(), 110_000);
}

/// Just under the limit (head + twice the tail) nothing is dropped.
#[tokio::test]
async fn an_output_of_96_kib_is_kept_whole() {
    let logs = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let engine = Engine::new(EngineConfig::default().log_dir(logs.path().join("logs")));
    let session = engine.session(ws.path()).unwrap();
    session.set_mode(Mode::Full);
    let outcome = run(&session, "head -c 98304 /dev/zero | tr '\\0' a").await;
    assert_eq!(outcome.output.len(), 98_304);
    assert!(outcome.status.truncation.is_none());
}
