//! The full-output log's bounds (issue 10): a per-command cap with a marker that says the log
//! holds only the first part, a budget for the whole directory (oldest logs go first), and no
//! log, with a notice, while the disk is nearly full.

use std::path::Path;

use acp_bash::exec::{Engine, EngineConfig, Exit, RunOutcome, RunRequest};
use acp_bash::tool::markers::render_result;
use tokio_util::sync::CancellationToken;

const MIB: u64 = 1 << 20;

async fn run(config: EngineConfig, dir: &Path, script: &str) -> RunOutcome {
    let session = Engine::new(config).session(dir).unwrap();
    let request = RunRequest::new(script);
    session
        .run(request, &mut |_: &str| {}, &CancellationToken::new())
        .await
}

fn config(dir: &Path) -> EngineConfig {
    EngineConfig::default()
        .log_dir(dir.join("logs"))
        .sandbox_mode(acp_bash::sandbox::Mode::Full)
}

fn logs(dir: &Path) -> Vec<(String, u64)> {
    let mut logs: Vec<_> = std::fs::read_dir(dir.join("logs"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        e.metadata().unwrap().len(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    logs.sort();
    logs
}

#[tokio::test]
async fn a_log_stops_at_its_cap_and_the_marker_says_it_holds_only_the_first_part() {
    let tmp = tempfile::tempdir().unwrap();
    let config = config(tmp.path()).max_log_bytes(MIB);
    // 1.5 MiB of output against a 1 MiB cap (the 1.5 GiB against the default 256 MiB,
    // scaled down).
    let outcome = run(
        config,
        tmp.path(),
        "head -c 1572864 /dev/zero | tr '\\0' 'x'",
    )
    .await;
    assert_eq!(outcome.status.exit, Exit::Code(0));
    let truncation = outcome.status.truncation.clone().expect("truncated");
    assert_eq!(truncation.log_holds_first, Some(MIB));
    let log = truncation.full_output.clone().expect("a log");
    let written = std::fs::read(&log).unwrap();
    assert_eq!(written.len() as u64, MIB);
    assert!(written.iter().all(|b| *b == b'x'));
    let text = render_result(&outcome.output, &outcome.status);
    let marker = format!(
        "[output truncated: {} bytes dropped, log holds only the first 1048576 bytes: {}]",
        truncation.dropped_bytes,
        serde_json::Value::from(log.as_str())
    );
    assert!(text.contains(&marker), "{text:?}");
}

#[tokio::test]
async fn the_log_directory_stays_within_its_budget_dropping_the_oldest_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let config = config(tmp.path())
        .max_log_bytes(MIB)
        .log_budget_bytes(2 * MIB + MIB / 2);
    let mut names = Vec::new();
    for _ in 0..4 {
        let outcome = run(config.clone(), tmp.path(), "head -c 1200000 /dev/zero").await;
        let log = outcome.status.truncation.unwrap().full_output.unwrap();
        names.push(
            Path::new(&log)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
        );
        let total: u64 = logs(tmp.path()).iter().map(|(_, len)| len).sum();
        assert!(total <= 2 * MIB + MIB / 2, "{:?}", logs(tmp.path()));
    }
    // Each log holds 1 MiB: the budget keeps the newest two.
    let kept: Vec<String> = logs(tmp.path()).into_iter().map(|(name, _)| name).collect();
    let mut newest = names[2..].to_vec();
    newest.sort();
    assert_eq!(kept, newest);
}

#[tokio::test]
async fn a_nearly_full_disk_gets_no_log_and_the_result_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    // A reserve no disk has: the disk counts as nearly full.
    let config = config(tmp.path()).log_disk_reserve(Some(u64::MAX));
    let outcome = run(config, tmp.path(), "head -c 300000 /dev/zero").await;
    let truncation = outcome.status.truncation.clone().expect("truncated");
    assert_eq!(truncation.full_output, None);
    assert!(
        outcome
            .output
            .contains("[acp-bash: no log was written: the disk holding")
            && outcome.output.contains("is nearly full"),
        "{}",
        outcome.output
    );
    assert!(logs(tmp.path()).is_empty(), "{:?}", logs(tmp.path()));
}
