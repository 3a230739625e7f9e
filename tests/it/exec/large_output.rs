//! 256 MB of output through the engine: memory stays bounded, the result keeps head and tail
//! with a truncation marker, and the full output is on disk. The test runs in a process of its
//! own ([`crate::support::in_own_process`]), so the peak RSS measured is this run's alone, not
//! what other tests of the binary raised.

use std::time::Duration;

use acp_bash::exec::{Engine, EngineConfig, Exit, RunRequest};
use tokio_util::sync::CancellationToken;

/// The process's peak resident set size, from /proc (Linux).
fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test]
async fn a_quarter_gigabyte_of_output_keeps_memory_bounded_and_the_full_log() {
    if !crate::support::in_own_process(
        "exec::large_output::a_quarter_gigabyte_of_output_keeps_memory_bounded_and_the_full_log",
    ) {
        return;
    }
    const MIB: u64 = 1024 * 1024;
    const TOTAL: u64 = 256 * MIB;
    let dir = tempfile::tempdir().unwrap();
    // The whole output in the log: this test checks that every byte got there.
    let config = EngineConfig::default()
        .log_dir(dir.path().join("logs"))
        .sandbox_mode(acp_bash::sandbox::Mode::Full)
        .max_log_bytes(u64::MAX);
    let session = Engine::new(config).session(dir.path()).unwrap();
    let before = peak_rss_bytes();
    let mut streamed = 0u64;
    let mut chunks = 0u64;
    let request = RunRequest::new(format!(
        "head -c {TOTAL} /dev/zero | tr '\\0' 'x'; echo; echo last line"
    ));
    let outcome = tokio::time::timeout(
        Duration::from_secs(300),
        session.run(
            request,
            &mut |chunk: &str| {
                streamed += chunk.len() as u64;
                chunks += 1;
            },
            &CancellationToken::new(),
        ),
    )
    .await
    .expect("the run hung");
    let growth = peak_rss_bytes().saturating_sub(before);

    assert_eq!(outcome.status.exit, Exit::Code(0));
    let total = TOTAL + "\nlast line\n".len() as u64;
    assert_eq!(streamed, total, "every byte is streamed");
    assert!(chunks > 1);
    let truncation = outcome.status.truncation.expect("the result is truncated");
    assert_eq!(truncation.dropped_bytes, total - 64 * 1024);
    assert!(outcome.output.contains(&format!(
        "[… {} bytes of output dropped here …]",
        truncation.dropped_bytes
    )));
    assert!(outcome.output.ends_with("x\nlast line\n"));
    assert!(outcome.output.len() < 70 * 1024);
    let log = std::path::PathBuf::from(truncation.full_output.expect("a full log"));
    assert_eq!(std::fs::metadata(&log).unwrap().len(), total);
    assert!(growth < 32 * MIB, "peak RSS grew by {} MiB", growth / MIB);
}
