//! The execution engine through the library, without ACP: where the agent's time goes.

use std::time::{Duration, Instant};

use acp_bash::exec::{Engine, EngineConfig, Exit, RunRequest, Session};
use acp_bash::sandbox::Mode;
use tokio_util::sync::CancellationToken;

use crate::raw;
use crate::stats::{median, ms, ratio, spread, Row};
use crate::wire::throughput_script;
use crate::Bench;

fn runtime() -> tokio::runtime::Runtime {
    // Like the agent's `#[tokio::main]`: one worker per core.
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn session(bench: &Bench, mode: Mode) -> Session {
    let config = EngineConfig {
        sandbox_mode: mode,
        log_dir: bench.engine_log_dir(),
        ..EngineConfig::default()
    };
    Engine::new(config).session(bench.session_dir()).unwrap()
}

/// Runs `script`; returns how long it took and how many bytes were streamed.
async fn run(session: &Session, script: &str) -> (Duration, u64, Exit) {
    let started = Instant::now();
    let mut streamed = 0u64;
    let outcome = session
        .run(
            RunRequest {
                script: script.into(),
                timeout: None,
            },
            &mut |chunk: &str| streamed += chunk.len() as u64,
            &CancellationToken::new(),
        )
        .await;
    (started.elapsed(), streamed, outcome.status.exit)
}

/// Engine per-command overhead: `true` through `Session::run` against `bash -c true`.
pub fn overhead(bench: &Bench) -> Vec<Row> {
    let count = if bench.quick { 40 } else { 200 };
    let rt = runtime();
    let mut rows = Vec::new();
    for (mode, budget) in [(Mode::Full, 1.0), (Mode::Workspace, 4.0)] {
        let session = session(bench, mode);
        let (mut engine_ms, mut raw_ms) = (Vec::new(), Vec::new());
        rt.block_on(async {
            for _ in 0..5 {
                run(&session, "true").await;
            }
        });
        for _ in 0..count {
            raw_ms.push(ms(raw::bash_to_devnull("true")));
            let (elapsed, _, exit) = rt.block_on(run(&session, "true"));
            assert_eq!(exit, Exit::Code(0));
            engine_ms.push(ms(elapsed));
        }
        let overhead = median(&engine_ms) - median(&raw_ms);
        rows.push(Row {
            case: "engine-overhead".into(),
            metric: format!("`true` through Session::run, {mode}"),
            median: spread(&engine_ms, "ms", 2),
            baseline: format!("`bash -c true`: {}", spread(&raw_ms, "ms", 2)),
            ratio: format!(
                "{} (+{overhead:.2} ms)",
                ratio(median(&engine_ms), median(&raw_ms))
            ),
            target: format!("(agent: ≤ raw + {budget} ms)"),
            met: None,
        });
    }
    rows
}

/// Engine throughput and memory: the throughput command through `Session::run` with a callback
/// that only counts, against /dev/null and a do-nothing pipe reader.
pub fn throughput(bench: &Bench) -> Vec<Row> {
    let runs = if bench.quick { 1 } else { 3 };
    let script = throughput_script(bench.bytes);
    let rt = runtime();
    let session = session(bench, Mode::Full);
    let (mut engine_s, mut null_s, mut pipe_s, mut growth) = (vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        null_s.push(raw::bash_to_devnull(&script).as_secs_f64());
        pipe_s.push(raw::bash_to_pipe_reader(&script).0.as_secs_f64());
        let before = reset_peak_rss();
        let (elapsed, streamed, exit) = rt.block_on(run(&session, &script));
        assert_eq!(exit, Exit::Code(0));
        assert_eq!(streamed, bench.bytes);
        let (_, peak) = crate::stats::rss_kib(std::process::id()).unwrap();
        growth.push(peak.saturating_sub(before) as f64 / 1024.0);
        engine_s.push(elapsed.as_secs_f64());
        bench.clean_engine_logs();
    }
    let rate = |seconds: &[f64]| -> Vec<f64> {
        seconds
            .iter()
            .map(|s| bench.bytes as f64 / s / 1e6)
            .collect()
    };
    let (engine_rate, null_rate, pipe_rate) = (rate(&engine_s), rate(&null_s), rate(&pipe_s));
    vec![
        Row {
            case: "engine-throughput".into(),
            metric: format!("{} MiB through Session::run, MB/s", bench.bytes >> 20),
            median: spread(&engine_rate, "MB/s", 0),
            baseline: format!("> /dev/null: {}", spread(&null_rate, "MB/s", 0)),
            ratio: ratio(median(&engine_rate), median(&null_rate)),
            target: "(agent: ≥ 0.7× raw)".into(),
            met: None,
        },
        Row {
            case: "engine-throughput".into(),
            metric: "against the pipe floor".into(),
            median: spread(&engine_rate, "MB/s", 0),
            baseline: format!("→ pipe → discard: {}", spread(&pipe_rate, "MB/s", 0)),
            ratio: ratio(median(&engine_rate), median(&pipe_rate)),
            target: "(context)".into(),
            met: None,
        },
        Row {
            case: "engine-throughput".into(),
            metric: "bench process peak RSS growth during the run".into(),
            median: spread(&growth, "MiB", 1),
            baseline: "-".into(),
            ratio: "-".into(),
            target: "(agent: ≤ 32 MiB in all)".into(),
            met: None,
        },
    ]
}

/// Resets this process's peak RSS to its current RSS (Linux `clear_refs` 5); returns it (KiB).
fn reset_peak_rss() -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    crate::stats::rss_kib(std::process::id()).unwrap().0
}
