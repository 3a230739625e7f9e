//! The execution engine through the library, without ACP: where the agent's time goes.

use std::time::{Duration, Instant};

use acp_bash::exec::{Engine, EngineConfig, Exit, RunRequest, Session};
use acp_bash::sandbox::Mode;
use tokio_util::sync::CancellationToken;

use super::raw;
use super::stats::{median, ms, ratio, spread, Row};
use super::wire::throughput_script;
use super::Bench;

fn runtime() -> tokio::runtime::Runtime {
    // Like the agent's `#[tokio::main]`: one worker per core.
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn session(bench: &Bench, mode: Mode) -> std::sync::Arc<Session> {
    let config = EngineConfig::default()
        .sandbox_mode(mode)
        .log_dir(bench.engine_log_dir());
    std::sync::Arc::new(Engine::new(config).session(bench.session_dir()).unwrap())
}

/// Runs `script` on a runtime worker, as the agent does (it spawns each run as a task).
fn run_on(
    rt: &tokio::runtime::Runtime,
    session: &std::sync::Arc<Session>,
    script: &str,
) -> (Duration, u64, Exit) {
    let session = session.clone();
    let script = script.to_string();
    rt.block_on(async move {
        tokio::spawn(async move { run(&session, &script).await })
            .await
            .unwrap()
    })
}

/// Runs `script`; returns how long it took and how many bytes were streamed.
async fn run(session: &Session, script: &str) -> (Duration, u64, Exit) {
    let started = Instant::now();
    let mut streamed = 0u64;
    let outcome = session
        .run(
            RunRequest::new(script),
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
    for (mode, budget) in [(Mode::Off, 1.0), (Mode::Workspace, 4.0), (Mode::Full, 4.0)] {
        let session = session(bench, mode);
        let (mut engine_ms, mut raw_ms) = (Vec::new(), Vec::new());
        rt.block_on(async {
            for _ in 0..5 {
                run(&session, "true").await;
            }
        });
        let mut paired = Vec::new();
        // Diagnosis (measured alongside `off`): `bash -c true` forked as the engine forks a
        // sandboxed shell, then also with the engine's prelude, then with each sandbox step.
        let diagnose = mode == Mode::Off;
        let prelude = bench.work.path().join(".prelude.bash");
        std::fs::write(&prelude, raw::engine_prelude()).unwrap();
        let cwd_file = bench.work.path().join(".cwd");
        let (mut forked, mut with_prelude) = (Vec::new(), Vec::new());
        let (mut confined_full, mut confined_workspace) = (Vec::new(), Vec::new());
        let roots = acp_bash::sandbox::Roots::new(bench.session_dir(), std::env::temp_dir());
        let (mut confined_read_only, mut confined_loaded) = (Vec::new(), Vec::new());
        let loaded = if diagnose {
            Some(loaded_roots(bench.work.path()))
        } else {
            None
        };
        for _ in 0..count {
            let raw = ms(raw::bash_to_devnull("true"));
            if diagnose {
                forked.push(ms(raw::bash_true_like_engine(None)) - raw);
                with_prelude
                    .push(ms(raw::bash_true_like_engine(Some((&prelude, &cwd_file)))) - raw);
                confined_full.push(ms(raw::bash_true_confined(Mode::Full, &roots)) - raw);
                confined_workspace.push(ms(raw::bash_true_confined(Mode::Workspace, &roots)) - raw);
                confined_read_only.push(ms(raw::bash_true_confined(Mode::ReadOnly, &roots)) - raw);
                if let Some(loaded) = &loaded {
                    confined_loaded
                        .push(ms(raw::bash_true_confined(Mode::Workspace, loaded)) - raw);
                }
            }
            let (elapsed, _, exit) = run_on(&rt, &session, "true");
            assert_eq!(exit, Exit::Code(0));
            raw_ms.push(raw);
            engine_ms.push(ms(elapsed));
            paired.push(ms(elapsed) - raw);
        }
        if diagnose {
            for (what, deltas) in [
                (
                    "forked with a pre_exec step, own group (how the engine starts a sandboxed shell, before its step)",
                    &forked,
                ),
                (
                    "… and the engine's BASH_ENV prelude + cwd file",
                    &with_prelude,
                ),
                (
                    "forked with `sandbox::confine(full)`'s step (no prelude)",
                    &confined_full,
                ),
                (
                    "forked with `sandbox::confine(workspace)`'s step (no prelude)",
                    &confined_workspace,
                ),
                (
                    "forked with `sandbox::confine(read-only)`'s step (no prelude)",
                    &confined_read_only,
                ),
                (
                    "forked with `sandbox::confine(workspace)`'s step, loaded: the session's own temp dir, a home with every masked credential (30 masks), 3 repositories (Git binds)",
                    &confined_loaded,
                ),
            ] {
                rows.push(Row {
                    case: "engine-overhead".into(),
                    metric: format!("diagnosis: `bash -c true` {what}"),
                    median: format!("paired Δ {:+.2} ms", median(deltas)),
                    baseline: "`bash -c true` (posix_spawn)".into(),
                    ratio: "-".into(),
                    target: "(context)".into(),
                    met: None,
                });
            }
        }
        let overhead = median(&paired);
        rows.push(Row {
            case: "engine-overhead".into(),
            metric: format!("`true` through Session::run, {mode}"),
            median: spread(&engine_ms, "ms", 2),
            baseline: format!("`bash -c true`: {}", spread(&raw_ms, "ms", 2)),
            ratio: format!(
                "{}; paired Δ {overhead:+.2} ms",
                ratio(median(&engine_ms), median(&raw_ms))
            ),
            target: format!("(agent: ≤ raw + {budget} ms)"),
            met: None,
        });
    }
    rows
}

/// What `--max-processes` and `--max-memory` cost a command (issue 44: cgroup v2 where cgroup v1
/// does not serve them, its folders made ahead and the processes forked straight in): `true`
/// through `Session::run` in workspace mode with both limits, and without them, interleaved
/// with `bash -c true`. Meant for the lab VM (cgroup v2, systemd); here cgroup v1 serves them.
pub fn limits(bench: &Bench) -> Vec<Row> {
    let count = if bench.quick { 40 } else { 200 };
    let rt = runtime();
    let limited = {
        let limits = acp_bash::sandbox::Limits::default()
            .max_processes(Some(256))
            .max_memory(Some(1 << 30));
        let config = EngineConfig::default()
            .sandbox_mode(Mode::Workspace)
            .limits(limits)
            .log_dir(bench.engine_log_dir());
        std::sync::Arc::new(Engine::new(config).session(bench.session_dir()).unwrap())
    };
    let unlimited = {
        let config = EngineConfig::default()
            .sandbox_mode(Mode::Workspace)
            .limits(
                acp_bash::sandbox::Limits::default()
                    .max_processes(None)
                    .max_memory(None),
            )
            .log_dir(bench.engine_log_dir());
        std::sync::Arc::new(Engine::new(config).session(bench.session_dir()).unwrap())
    };
    // The first command with a limit sets the cgroup subtree up (a D-Bus round trip).
    for _ in 0..5 {
        run_on(&rt, &limited, "true");
        run_on(&rt, &unlimited, "true");
    }
    let (mut raw_ms, mut on_ms, mut off_ms, mut on_delta, mut off_delta) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..count {
        let raw = ms(raw::bash_to_devnull("true"));
        let (on, _, exit) = run_on(&rt, &limited, "true");
        assert_eq!(exit, Exit::Code(0));
        let (off, _, exit) = run_on(&rt, &unlimited, "true");
        assert_eq!(exit, Exit::Code(0));
        raw_ms.push(raw);
        on_ms.push(ms(on));
        off_ms.push(ms(off));
        on_delta.push(ms(on) - raw);
        off_delta.push(ms(off) - raw);
    }
    let how = acp_bash::sandbox::doctor_report()
        .lines()
        .find(|l| l.contains("resource limits"))
        .unwrap_or_default()
        .trim()
        .to_string();
    vec![
        Row {
            case: "engine-limits".into(),
            metric: format!("`true` through Session::run, workspace, --max-processes 256 --max-memory 1G ({how})"),
            median: spread(&on_ms, "ms", 2),
            baseline: format!("`bash -c true`: {}", spread(&raw_ms, "ms", 2)),
            ratio: format!(
                "paired Δ {:+.2} ms; without the limits {:+.2} ms",
                median(&on_delta),
                median(&off_delta)
            ),
            target: "(workspace with both limits: ≤ raw + 1.5 ms)".into(),
            met: None,
        },
        Row {
            case: "engine-limits".into(),
            metric: "`true` through Session::run, workspace, no limits".into(),
            median: spread(&off_ms, "ms", 2),
            baseline: format!("`bash -c true`: {}", spread(&raw_ms, "ms", 2)),
            ratio: format!("paired Δ {:+.2} ms", median(&off_delta)),
            target: "(context)".into(),
            met: None,
        },
    ]
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
        let (elapsed, streamed, exit) = run_on(&rt, &session, &script);
        assert_eq!(exit, Exit::Code(0));
        assert_eq!(streamed, bench.bytes);
        let (_, peak) = super::stats::rss_kib(std::process::id()).unwrap();
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
    super::stats::rss_kib(std::process::id()).unwrap().0
}

/// The engine's per-byte work alone, no processes: the throughput command's bytes, in 64 KiB
/// pieces (the engine's read size), through a `Capture` (with its full log) and a `Chunker`, as
/// `run` does;
/// against one copy of the same bytes.
pub fn chunk_capture(bench: &Bench) -> Vec<Row> {
    use acp_bash::exec::capture::Capture;
    use acp_bash::exec::chunk::Chunker;
    const PIECE: usize = 64 * 1024;
    let runs = if bench.quick { 3 } else { 5 };
    let line: Vec<u8> = [&[b'x'; 63][..], b"\n"].concat();
    let piece: Vec<u8> = line.iter().copied().cycle().take(PIECE).collect();
    let pieces = (bench.bytes / PIECE as u64).max(1);
    let bytes = pieces * PIECE as u64;
    let (mut engine_s, mut copy_s) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let mut sink = vec![0u8; PIECE];
        let started = Instant::now();
        for _ in 0..pieces {
            sink.copy_from_slice(std::hint::black_box(&piece));
            std::hint::black_box(&mut sink);
        }
        copy_s.push(started.elapsed().as_secs_f64());

        let started = Instant::now();
        let mut chunker = Chunker::default();
        let mut capture = Capture::new(32 * 1024, 32 * 1024, &bench.engine_log_dir());
        let mut streamed = 0usize;
        for _ in 0..pieces {
            let piece = std::hint::black_box(&piece[..]);
            capture.push(piece);
            streamed += chunker.push_borrowed(piece).len();
        }
        streamed += chunker.finish().len();
        let captured = capture.finish();
        engine_s.push(started.elapsed().as_secs_f64());
        assert_eq!(streamed as u64, bytes);
        assert!(captured.truncation.is_some());
        bench.clean_engine_logs();
    }
    let rate =
        |seconds: &[f64]| -> Vec<f64> { seconds.iter().map(|s| bytes as f64 / s / 1e6).collect() };
    vec![Row {
        case: "engine-chunk-capture".into(),
        metric: format!(
            "{} MiB through Chunker + Capture (log on disk), MB/s",
            bytes >> 20
        ),
        median: spread(&rate(&engine_s), "MB/s", 0),
        baseline: format!("one memcpy: {}", spread(&rate(&copy_s), "MB/s", 0)),
        ratio: ratio(median(&rate(&engine_s)), median(&rate(&copy_s))),
        target: "(context: CPU per byte)".into(),
        met: None,
    }]
}

/// Roots as heavy as the view gets on a developer's machine: the session's own temp folder, a
/// home holding every credential file the view masks, and a session folder with a repository
/// and two nested ones (their `.git` pinned, hooks and config bound read-only).
fn loaded_roots(work: &std::path::Path) -> acp_bash::sandbox::Roots {
    let base = work.join("loaded");
    let (ws, home, temp) = (base.join("ws"), base.join("home"), base.join("tmp"));
    for dir in [&ws, &home, &temp] {
        std::fs::create_dir_all(dir).unwrap();
    }
    for rel in acp_bash::sandbox::HOME_CREDENTIALS {
        let path = home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "secret").unwrap();
    }
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    for key in ["id_ed25519", "id_rsa", "deploy.pem"] {
        std::fs::write(home.join(".ssh").join(key), "secret").unwrap();
    }
    let mut repos = Vec::new();
    for repo in [ws.clone(), ws.join("a"), ws.join("libs/b")] {
        std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\n").unwrap();
        if repo != ws {
            repos.push(repo);
        }
    }
    let mut protection = acp_bash::sandbox::Protection::default();
    protection.home = Some(home);
    protection.git_repos = repos;
    acp_bash::sandbox::Roots::new(&ws, std::env::temp_dir())
        .session_temp(temp)
        .protection(protection)
}

/// What the process layers of issue 19 cost each command (the seccomp filter and the fresh
/// session keyring; `setsid` replaced `setpgid`, one system call either way): workspace-mode
/// spawns with every layer against the same spawns without those two, interleaved with a raw
/// `bash -c` so that all three see the same load. Two scripts: `true`, and one that makes
/// thousands of system calls (each runs through the filter).
pub fn layers(bench: &Bench) -> Vec<Row> {
    let count = if bench.quick { 40 } else { 200 };
    let roots = acp_bash::sandbox::Roots::new(bench.session_dir(), std::env::temp_dir());
    let all = acp_bash::sandbox::Support::current().clone();
    let mut without = all.clone();
    without.seccomp = Err("bench: off".into());
    without.session_keyring = Err("bench: off".into());
    let mut rows = Vec::new();
    for script in [
        "true",
        "for i in $(seq 200); do cat /etc/hostname; done > /dev/null",
    ] {
        let (mut with_layers, mut without_layers, mut cost) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..count {
            let raw = ms(raw::bash_to_devnull(script));
            let on = ms(raw::bash_confined_with(
                Mode::Workspace,
                &roots,
                &all,
                script,
            ));
            let off = ms(raw::bash_confined_with(
                Mode::Workspace,
                &roots,
                &without,
                script,
            ));
            with_layers.push(on - raw);
            without_layers.push(off - raw);
            cost.push(on - off);
        }
        rows.push(Row {
            case: "engine-layers".into(),
            metric: format!("workspace spawn of `{script}`: seccomp + fresh keyring"),
            median: format!("paired Δ {:+.2} ms", median(&cost)),
            baseline: format!(
                "vs raw: with {:+.2} ms, without {:+.2} ms",
                median(&with_layers),
                median(&without_layers)
            ),
            ratio: "-".into(),
            target: "(context)".into(),
            met: None,
        });
    }
    rows
}

/// What each layer of the view costs a command, in one run against a raw spawn: `bash -c true`
/// spawned through `sandbox::spawn` with the layers added one at a time (each row's roots hold
/// the previous row's and one more), interleaved with a raw `bash -c true` so that every row
/// sees the same load. A row's own cost is the median of its paired difference from the row
/// above it (same iteration). Run as the bench's user: root makes no cgroup here (the library's
/// default limits), as `Session::run` would not either without `--max-processes`.
pub fn view(bench: &Bench) -> Vec<Row> {
    use acp_bash::sandbox::{Protection, Roots, Support};
    let count = if bench.quick { 40 } else { 200 };
    let base = bench.work.path().join("view-layers");
    let (ws, temp, layer, home) = (
        base.join("ws"),
        base.join("session-tmp"),
        base.join("layers"),
        base.join("home"),
    );
    for dir in [&ws, &temp, &layer, &home] {
        std::fs::create_dir_all(dir).unwrap();
    }
    // Three package caches, as on the bench machine's own home (cargo, rustup, npm).
    for cache in [".cargo/registry", ".rustup", ".npm"] {
        std::fs::create_dir_all(home.join(cache)).unwrap();
    }
    let bare = Roots::new(&ws, std::env::temp_dir());
    let with_temp = bare.clone().session_temp(&temp);
    let mut caches_only = Protection::default();
    caches_only.home = Some(home.clone());
    let with_caches = with_temp
        .clone()
        .cache_layer(&layer)
        .protection(caches_only.clone());
    // Every credential the view masks (30 masks), then three repositories (Git binds).
    let credentials = |home: &std::path::Path| {
        for rel in acp_bash::sandbox::HOME_CREDENTIALS {
            let path = home.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "secret").unwrap();
        }
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        for key in ["id_ed25519", "id_rsa", "deploy.pem"] {
            std::fs::write(home.join(".ssh").join(key), "secret").unwrap();
        }
    };
    let home_masked = base.join("home-masked");
    for cache in [".cargo/registry", ".rustup", ".npm"] {
        std::fs::create_dir_all(home_masked.join(cache)).unwrap();
    }
    credentials(&home_masked);
    let mut masked = caches_only.clone();
    masked.home = Some(home_masked);
    let with_masks = with_caches.clone().protection(masked.clone());
    let mut repos = Vec::new();
    for repo in [ws.clone(), ws.join("a"), ws.join("libs/b")] {
        std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\n").unwrap();
        if repo != ws {
            repos.push(repo);
        }
    }
    let mut with_git_protection = masked;
    with_git_protection.git_repos = repos;
    let with_git = with_masks.clone().protection(with_git_protection);
    let all = Support::current().clone();
    let mut no_view = all.clone();
    no_view.filesystem_view = Err("bench: off".into());
    let steps: [(&str, Mode, &Roots, &Support); 8] = [
        (
            "full mode (user/PID/mount/UTS/IPC namespaces, no view)",
            Mode::Full,
            &bare,
            &all,
        ),
        (
            "workspace without the view (namespaces, Landlock, seccomp)",
            Mode::Workspace,
            &bare,
            &no_view,
        ),
        (
            "workspace: + the view (/ read-only, the session folder bound, own /dev, socket masks)",
            Mode::Workspace,
            &bare,
            &all,
        ),
        (
            "workspace: + the session's own /tmp",
            Mode::Workspace,
            &with_temp,
            &all,
        ),
        (
            "workspace: + 3 package-cache layers (overlayfs)",
            Mode::Workspace,
            &with_caches,
            &all,
        ),
        (
            "workspace: + 30 credential masks",
            Mode::Workspace,
            &with_masks,
            &all,
        ),
        (
            "workspace: + 3 repositories' Git metadata",
            Mode::Workspace,
            &with_git,
            &all,
        ),
        (
            "read-only (own network namespace, tmpfs /tmp)",
            Mode::ReadOnly,
            &bare,
            &all,
        ),
    ];
    let mut deltas: Vec<Vec<f64>> = vec![Vec::new(); steps.len()];
    let mut own: Vec<Vec<f64>> = vec![Vec::new(); steps.len()];
    for _ in 0..5 {
        for (_, mode, roots, support) in &steps {
            raw::bash_confined_with(*mode, roots, support, "true");
        }
    }
    for _ in 0..count {
        let raw = ms(raw::bash_to_devnull("true"));
        let mut previous = None;
        for (i, (_, mode, roots, support)) in steps.iter().enumerate() {
            let took = ms(raw::bash_confined_with(*mode, roots, support, "true"));
            deltas[i].push(took - raw);
            // Read-only's row stands alone (against full mode, the row without a view).
            let against = if *mode == Mode::ReadOnly {
                Some(deltas[0][deltas[0].len() - 1] + raw)
            } else {
                previous
            };
            if let Some(before) = against {
                own[i].push(took - before);
            }
            previous = Some(took);
        }
    }
    steps
        .iter()
        .enumerate()
        .map(|(i, (what, _, _, _))| Row {
            case: "engine-view".into(),
            metric: format!("`bash -c true`, {what}"),
            median: format!("paired Δ {:+.2} ms", median(&deltas[i])),
            baseline: if own[i].is_empty() {
                "vs raw `bash -c true`".into()
            } else if i == steps.len() - 1 {
                format!("this layer vs full mode: {:+.2} ms", median(&own[i]))
            } else {
                format!("this layer vs the row above: {:+.2} ms", median(&own[i]))
            },
            ratio: "-".into(),
            target: "(context)".into(),
            met: None,
        })
        .collect()
}
