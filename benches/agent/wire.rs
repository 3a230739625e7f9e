//! The agent over its real stdio, as an editor drives it.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::client::{zed_initialize_params, Agent, Line, Result};
use super::raw;
use super::stats::{median, mib, ms, ratio, rss_kib, spread, Row};
use super::Bench;

/// The agent's live-output limits, from the library so that the budget follows the code: at
/// most `max_streamed_bytes` streamed per call, batches of at most `max_batch_bytes`, at least
/// `min_interval` between batches.
fn stream_limits() -> acp_bash::acp::stream::StreamLimits {
    acp_bash::acp::stream::StreamLimits::default()
}

/// A started agent, initialized like Zed, with one session.
pub struct Ready {
    pub agent: Agent,
    pub session: String,
}

pub fn ready(bench: &Bench, sandbox: Option<&str>) -> Result<Ready> {
    let mut agent = bench.spawn_agent(sandbox)?;
    agent.initialize()?;
    let session = agent.new_session(bench.session_dir())?;
    Ok(Ready { agent, session })
}

/// What one prompt produced on the wire.
#[derive(Default)]
pub struct Turn {
    pub elapsed: Duration,
    updates: u64,
    output_bytes: u64,
    stop_reason: String,
    final_status: Option<String>,
}

/// Sends `script` and waits for its answer, counting the updates and the output they carry.
pub fn prompt(ready: &mut Ready, script: &str, timeout: Duration) -> Result<Turn> {
    let (id, sent) = ready.agent.send_prompt(&ready.session, script)?;
    let mut turn = Turn::default();
    let answer = ready.agent.wait_response(id, timeout, |line: &Line| {
        let Some(update) = line.update() else { return };
        turn.updates += 1;
        if let Some(data) = line.terminal_output() {
            turn.output_bytes += data.len() as u64;
        }
        if let Some(status) = update.get("status").and_then(Value::as_str) {
            turn.final_status = Some(status.to_string());
        }
    })?;
    turn.elapsed = answer.at - sent;
    turn.stop_reason = answer
        .value
        .pointer("/result/stopReason")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    Ok(turn)
}

pub fn check_completed(turn: &Turn, script: &str) -> Result<()> {
    if turn.stop_reason != "end_turn" || turn.final_status.as_deref() != Some("completed") {
        return Err(super::client::ClientError(format!(
            "{script:?} ended with stopReason {} and status {:?}",
            turn.stop_reason, turn.final_status
        )));
    }
    Ok(())
}

/// 1. Start-up: spawn → `initialize` answered, and the agent's memory then; against `cat`
///    echoing the same line.
pub fn startup(bench: &Bench) -> Result<Vec<Row>> {
    let runs = if bench.quick { 5 } else { 21 };
    let line = serde_json::to_string(&serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": zed_initialize_params()
    }))
    .unwrap();
    let (mut agent_ms, mut agent_rss, mut cat_ms, mut cat_rss) = (vec![], vec![], vec![], vec![]);
    // The same agent without the environment scrub: what the scrub costs at start-up.
    let mut unscrubbed_ms = Vec::new();
    // The same agent with `--model` (a loopback base URL nothing answers): what the model
    // driver costs an agent before its first prompt, paired with the default started just after.
    let model_args = bench.model_args();
    let model_args: Vec<&str> = model_args.iter().map(String::as_str).collect();
    let (mut model_ms, mut model_rss, mut model_paired_ms) = (vec![], vec![], vec![]);
    let mut answered_by = String::new();
    for _ in 0..runs {
        let started = Instant::now();
        let mut agent = bench.spawn_agent_with(&model_args)?;
        let (_, answer) = agent.initialize()?;
        model_ms.push(ms(answer.at - started));
        let (rss, _) = rss_kib(agent.pid).unwrap_or((0, 0));
        model_rss.push(mib(rss));
        agent.shutdown(Duration::from_secs(2));

        let started = Instant::now();
        if let Ok(mut agent) = bench.spawn_agent_with(&["--no-env-scrub"]) {
            if let Ok((_, answer)) = agent.initialize() {
                unscrubbed_ms.push(ms(answer.at - started));
            }
            agent.shutdown(Duration::from_secs(2));
        }

        let (elapsed, rss) = raw::cat_echo(&line);
        cat_ms.push(ms(elapsed));
        cat_rss.push(mib(rss));

        let started = Instant::now();
        let mut agent = bench.spawn_agent(None)?;
        let (_, answer) = agent.initialize()?;
        agent_ms.push(ms(answer.at - started));
        model_paired_ms.push(model_ms[model_ms.len() - 1] - ms(answer.at - started));
        let (rss, _) = rss_kib(agent.pid).unwrap_or((0, 0));
        agent_rss.push(mib(rss));
        if let Some(name) = answer.value.pointer("/result/agentInfo/name") {
            answered_by = name.to_string();
        }
        agent.shutdown(Duration::from_secs(2));
    }
    let time_median = median(&agent_ms);
    let rss_median = median(&agent_rss);
    let mut rows = vec![
        Row {
            case: "startup".into(),
            metric: format!("spawn → initialize answered ({answered_by})"),
            median: spread(&agent_ms, "ms", 2),
            baseline: format!("`cat` echoing the line: {}", spread(&cat_ms, "ms", 2)),
            ratio: ratio(time_median, median(&cat_ms)),
            target: "≤ 2 ms (issue 24)".into(),
            met: Some(time_median <= 2.0),
        },
        Row {
            case: "startup".into(),
            metric: "agent RSS after initialize".into(),
            median: spread(&agent_rss, "MiB", 1),
            baseline: format!("`cat`: {}", spread(&cat_rss, "MiB", 1)),
            ratio: ratio(rss_median, median(&cat_rss)),
            target: "≤ 10 MiB".into(),
            met: Some(rss_median <= 10.0),
        },
    ];
    let connections = bench.model_connections();
    rows.push(Row {
        case: "startup".into(),
        metric: format!(
            "spawn → initialize answered with `--model` (connections to its base URL: {connections})"
        ),
        median: spread(&model_ms, "ms", 2),
        baseline: format!("without `--model`: {}", spread(&agent_ms, "ms", 2)),
        ratio: format!(
            "{}; paired Δ {:+.2} ms",
            ratio(median(&model_ms), time_median),
            median(&model_paired_ms)
        ),
        target: "≤ 2 ms, no connection".into(),
        met: Some(median(&model_ms) <= 2.0 && connections == 0),
    });
    rows.push(Row {
        case: "startup".into(),
        metric: "agent RSS after initialize with `--model`".into(),
        median: spread(&model_rss, "MiB", 1),
        baseline: format!("without `--model`: {}", spread(&agent_rss, "MiB", 1)),
        ratio: ratio(median(&model_rss), rss_median),
        target: "≤ 10 MiB".into(),
        met: Some(median(&model_rss) <= 10.0),
    });
    if unscrubbed_ms.len() == runs {
        rows.push(Row {
            case: "startup".into(),
            metric: "diagnosis: spawn → initialize answered with `--no-env-scrub`".into(),
            median: spread(&unscrubbed_ms, "ms", 2),
            baseline: format!("the default (scrub on): {}", spread(&agent_ms, "ms", 2)),
            ratio: ratio(median(&unscrubbed_ms), time_median),
            target: "(context)".into(),
            met: None,
        });
    }
    Ok(rows)
}

/// 2. Per-command overhead: sequential prompts of `true` against `bash -c true` spawned directly,
///    interleaved one for one, with the sandbox off (`off`) and on (each sandboxed mode). `true`
///    cannot change its shell's state, so it runs without the prelude; `: $PWD` (which changes
///    nothing either, but the scan cannot tell) shows what a command that takes the prelude and
///    its report pays. Targets: issue 24's (`off` ≤ raw + 0.5 ms, workspace and read-only
///    ≤ raw + 1 ms); `full` and the prelude's rows have none of their own.
pub fn overhead(bench: &Bench) -> Result<Vec<Row>> {
    let count = if bench.quick { 40 } else { 200 };
    let mut rows = Vec::new();
    let model_args = bench.model_args();
    // The last one: the default mode with `--model`, the command typed as `!true` (run directly,
    // no model request), against the same loopback base URL as the start-up case.
    for (mode, with_model, script, budget_ms) in [
        ("off", false, "true", Some(0.5)),
        ("workspace", false, "true", Some(1.0)),
        ("read-only", false, "true", Some(1.0)),
        ("full", false, "true", None),
        ("off", false, ": $PWD", None),
        ("workspace", false, ": $PWD", None),
        ("workspace", true, "true", Some(1.0)),
    ] {
        let (script, label) = match with_model {
            false => (
                script.to_string(),
                format!("`{script}` per prompt, --sandbox {mode}"),
            ),
            true => (
                format!("!{script}"),
                format!("`!{script}` per prompt, --sandbox {mode} --model"),
            ),
        };
        let script = script.as_str();
        let mut args = vec!["--sandbox", mode];
        if with_model {
            args.extend(model_args.iter().map(String::as_str));
        }
        let started = bench.spawn_agent_with(&args).and_then(|mut agent| {
            agent.initialize()?;
            let session = agent.new_session(bench.session_dir())?;
            Ok(Ready { agent, session })
        });
        let mut ready = match started {
            Ok(ready) => ready,
            Err(error) => {
                rows.push(Row::unavailable("overhead", &label, &error.to_string()));
                continue;
            }
        };
        for _ in 0..5 {
            check_completed(
                &prompt(&mut ready, script, Duration::from_secs(10))?,
                script,
            )?;
        }
        let (mut agent_ms, mut raw_ms, mut paired) = (Vec::new(), Vec::new(), Vec::new());
        let mut agent_total = Duration::ZERO;
        let mut raw_total = Duration::ZERO;
        for _ in 0..count {
            let raw = raw::bash_to_devnull("true");
            raw_total += raw;
            raw_ms.push(ms(raw));
            let turn = prompt(&mut ready, script, Duration::from_secs(10))?;
            check_completed(&turn, script)?;
            agent_total += turn.elapsed;
            agent_ms.push(ms(turn.elapsed));
            paired.push(ms(turn.elapsed) - ms(raw));
        }
        ready.agent.shutdown(Duration::from_secs(2));
        let label = match with_model {
            true => format!(
                "{label}, connections to its base URL: {}",
                bench.model_connections()
            ),
            false => label,
        };
        // Each prompt is paired with the raw spawn just before it (same load): the median of
        // the differences is steadier than the difference of the medians.
        let overhead = median(&paired);
        rows.push(Row {
            case: "overhead".into(),
            metric: format!(
                "{label} (totals: {:.0} ms vs {:.0} ms for {count})",
                ms(agent_total),
                ms(raw_total)
            ),
            median: spread(&agent_ms, "ms", 2),
            baseline: format!("`bash -c true`: {}", spread(&raw_ms, "ms", 2)),
            ratio: format!(
                "{}; paired Δ {overhead:+.2} ms",
                ratio(median(&agent_ms), median(&raw_ms))
            ),
            target: budget_ms.map_or("(context)".into(), |ms| format!("≤ raw + {ms} ms")),
            met: budget_ms.map(|ms| overhead <= ms),
        });
    }
    Ok(rows)
}

/// The command that prints the throughput case's bytes: 64-byte lines of text.
pub fn throughput_script(bytes: u64) -> String {
    format!("yes {} | head -c {bytes}", "x".repeat(63))
}

/// 3. Throughput and memory: the command printing `bench.bytes` through the card path, against
///    the same command into /dev/null (and, for context, into a pipe drained by a reader that
///    does nothing, and into a file in the agent's temp dir, where the agent keeps its log).
pub fn throughput(bench: &Bench) -> Result<Vec<Row>> {
    let runs = if bench.quick { 1 } else { 5 };
    let script = throughput_script(bench.bytes);
    let (mut agent_s, mut null_s, mut pipe_s, mut file_s) = (vec![], vec![], vec![], vec![]);
    let (mut peaks, mut streamed, mut updates, mut budgets) = (vec![], vec![], vec![], vec![]);
    let limits = stream_limits();
    let stream_cap = limits.max_streamed_bytes as u64;
    for _ in 0..runs {
        null_s.push(raw::bash_to_devnull(&script).as_secs_f64());
        let (elapsed, read) = raw::bash_to_pipe_reader(&script);
        assert_eq!(read, bench.bytes);
        pipe_s.push(elapsed.as_secs_f64());
        let kept = bench.work.path().join(".kept-output");
        file_s.push(raw::bash_to_file(&script, &kept).as_secs_f64());

        let mut ready = ready(bench, Some("full"))?;
        let turn = prompt(&mut ready, &script, Duration::from_secs(300))?;
        check_completed(&turn, &script)?;
        let (_, peak) = rss_kib(ready.agent.pid).unwrap_or((0, 0));
        ready.agent.shutdown(Duration::from_secs(5));
        bench.clean_agent_tmp();
        agent_s.push(turn.elapsed.as_secs_f64());
        peaks.push(mib(peak));
        streamed.push(turn.output_bytes as f64);
        updates.push(turn.updates as f64);
        // tool_call + final update + one batch per interval + the batches that filled early.
        let budget = 2
            + (turn.elapsed.as_secs_f64() / limits.min_interval.as_secs_f64()).ceil() as u64
            + stream_cap / limits.max_batch_bytes as u64
            + 1;
        budgets.push(budget as f64);
    }
    let gib = bench.bytes as f64 / (1u64 << 30) as f64;
    let size = if bench.bytes >= 1 << 30 {
        format!("{gib:.0} GiB")
    } else {
        format!("{} MiB", bench.bytes >> 20)
    };
    let rate = |seconds: &[f64]| -> Vec<f64> {
        seconds
            .iter()
            .map(|s| bench.bytes as f64 / s / 1e6)
            .collect()
    };
    let (agent_rate, null_rate, pipe_rate) = (rate(&agent_s), rate(&null_s), rate(&pipe_s));
    let file_rate = rate(&file_s);
    let throughput_ratio = median(&agent_rate) / median(&null_rate);
    // The cap, plus the line that says streaming stopped and the one naming the full log
    // (a path: at most PATH_MAX).
    let notices = acp_bash::acp::stream::cap_notice(&limits).len()
        + acp_bash::acp::stream::full_output_notice("").len()
        + libc::PATH_MAX as usize;
    let cap = stream_cap + notices as u64;
    Ok(vec![
        Row {
            case: "throughput".into(),
            metric: format!("{size} through the card path, MB/s"),
            median: spread(&agent_rate, "MB/s", 0),
            baseline: format!(
                "same command > /dev/null: {}",
                spread(&null_rate, "MB/s", 0)
            ),
            ratio: ratio(median(&agent_rate), median(&null_rate)),
            target: "≥ 0.7× raw".into(),
            met: Some(throughput_ratio >= 0.7),
        },
        Row {
            case: "throughput".into(),
            metric: format!("{size}: pipe floor (a 64 KiB reader that does nothing), MB/s"),
            median: spread(&agent_rate, "MB/s", 0),
            baseline: format!(
                "same command → pipe → discard: {}",
                spread(&pipe_rate, "MB/s", 0)
            ),
            ratio: ratio(median(&agent_rate), median(&pipe_rate)),
            target: "(context)".into(),
            met: None,
        },
        Row {
            case: "throughput".into(),
            metric: format!("{size}: keeping it (the command > a file, no agent), MB/s"),
            median: spread(&file_rate, "MB/s", 0),
            baseline: format!(
                "same command > /dev/null: {}",
                spread(&null_rate, "MB/s", 0)
            ),
            ratio: ratio(median(&file_rate), median(&null_rate)),
            target: "(context: the ceiling for any agent that keeps the output)".into(),
            met: None,
        },
        Row {
            case: "throughput".into(),
            metric: "agent peak RSS (VmHWM)".into(),
            median: spread(&peaks, "MiB", 1),
            baseline: "-".into(),
            ratio: "-".into(),
            target: "≤ 32 MiB".into(),
            met: Some(peaks.iter().all(|p| *p <= 32.0)),
        },
        Row {
            case: "throughput".into(),
            metric: "bytes streamed to the client".into(),
            median: spread(&streamed, "B", 0),
            baseline: format!("printed: {} B", bench.bytes),
            ratio: "-".into(),
            target: format!("≤ cap {stream_cap} B + notices (≤ {notices} B)"),
            met: Some(streamed.iter().all(|s| *s as u64 <= cap)),
        },
        Row {
            case: "throughput".into(),
            metric: "session/update count".into(),
            median: spread(&updates, "", 0),
            baseline: format!("budget: {}", spread(&budgets, "", 0)),
            ratio: ratio(median(&updates), median(&budgets)),
            target: format!(
                "≤ 2 + ⌈t / {} ms⌉ + cap / {} KiB + 1",
                limits.min_interval.as_millis(),
                limits.max_batch_bytes / 1024
            ),
            met: Some(updates.iter().zip(&budgets).all(|(u, b)| u <= b)),
        },
    ])
}

/// 4. First-output latency, in every mode: `echo ready; sleep 1`, prompt sent → the update
///    carrying `ready`; against spawning the same script and reading its first byte. The
///    script prints when it wrote (`$EPOCHREALTIME`), so each row also says how much of the
///    wait came after bash had written (the agent's delivery) and how much before (the spawn).
pub fn latency(bench: &Bench) -> Result<Vec<Row>> {
    let runs = if bench.quick { 2 } else { 7 };
    let script = "echo ready@$EPOCHREALTIME; sleep 1";
    let modes = ["off", "workspace", "read-only", "full"];
    let mut agents = Vec::new();
    for mode in modes {
        let mut ready = ready(bench, Some(mode))?;
        check_completed(
            &prompt(&mut ready, "true", Duration::from_secs(10))?,
            "true",
        )?;
        agents.push(ready);
    }
    let mut agent_ms = vec![Vec::new(); modes.len()];
    let mut after_write_ms = vec![Vec::new(); modes.len()];
    let mut raw_ms = Vec::new();
    // Interleaved: one prompt of each mode per round, so load moves every mode alike.
    for _ in 0..runs {
        raw_ms.push(ms(raw::bash_first_output(script)));
        for (i, ready) in agents.iter_mut().enumerate() {
            let wall_sent = std::time::SystemTime::now();
            let (id, sent) = ready.agent.send_prompt(&ready.session, script)?;
            let mut first = None;
            ready
                .agent
                .wait_response(id, Duration::from_secs(10), |line| {
                    if first.is_none() {
                        if let Some(data) = line.terminal_output().filter(|d| d.contains("ready")) {
                            first = Some((line.at, written_at(data)));
                        }
                    }
                })?;
            match first {
                Some((at, written)) => {
                    let total = at - sent;
                    agent_ms[i].push(ms(total));
                    if let Some(written) = written {
                        let before = written
                            .duration_since(wall_sent)
                            .unwrap_or(Duration::ZERO)
                            .min(total);
                        after_write_ms[i].push(ms(total - before));
                    }
                }
                None => {
                    return Err(super::client::ClientError(format!(
                        "no terminal_output update carried `ready` ({})",
                        modes[i]
                    )))
                }
            }
        }
    }
    let mut rows = Vec::new();
    for (i, ready) in agents.into_iter().enumerate() {
        ready.agent.shutdown(Duration::from_secs(2));
        let latency = median(&agent_ms[i]);
        rows.push(Row {
            case: "latency".into(),
            metric: format!(
                "prompt sent → update carrying `ready`, --sandbox {} (of which after bash wrote it: {} ms median)",
                modes[i],
                if after_write_ms[i].is_empty() {
                    "?".to_string()
                } else {
                    format!("{:.2}", median(&after_write_ms[i]))
                }
            ),
            median: spread(&agent_ms[i], "ms", 2),
            baseline: format!("spawn → first byte: {}", spread(&raw_ms, "ms", 2)),
            ratio: ratio(latency, median(&raw_ms)),
            target: "≤ 5 ms".into(),
            met: Some(latency <= 5.0),
        });
    }
    Ok(rows)
}

/// When the script wrote `ready` (`ready@<EPOCHREALTIME>`), as a wall-clock instant.
fn written_at(data: &str) -> Option<std::time::SystemTime> {
    let stamp = data.split("ready@").nth(1)?.split_whitespace().next()?;
    let seconds: f64 = stamp.parse().ok()?;
    Some(std::time::UNIX_EPOCH + Duration::from_secs_f64(seconds))
}

/// 5. Concurrency: 20 sessions each running `sleep 0.5; echo done` at once; against 20 shells
///    spawned at once.
pub fn concurrency(bench: &Bench) -> Result<Vec<Row>> {
    const SESSIONS: usize = 20;
    let runs = if bench.quick { 1 } else { 5 };
    let script = "sleep 0.5; echo done";
    let mut agent = bench.spawn_agent(Some("full"))?;
    agent.initialize()?;
    let sessions = (0..SESSIONS)
        .map(|_| agent.new_session(bench.session_dir()))
        .collect::<Result<Vec<_>>>()?;
    let (mut agent_s, mut raw_s) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        raw_s.push(raw::bash_concurrent(script, SESSIONS).as_secs_f64());
        let mut pending = std::collections::HashMap::new();
        let mut first_sent = None;
        for session in &sessions {
            let (id, sent) = agent.send_prompt(session, script)?;
            first_sent.get_or_insert(sent);
            pending.insert(id, ());
        }
        let first_sent = first_sent.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = first_sent;
        let mut done_seen = 0;
        while !pending.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(super::client::ClientError(format!(
                    "{} prompts unanswered after 30 s",
                    pending.len()
                )));
            }
            let Some(line) = agent.next_line(left)? else {
                continue;
            };
            if line.terminal_output().is_some_and(|d| d.contains("done")) {
                done_seen += 1;
            }
            if line.method().is_none() {
                if let Some(id) = line.value.get("id").and_then(Value::as_u64) {
                    if pending.remove(&id).is_some() {
                        last = line.at;
                    }
                }
            }
        }
        assert_eq!(done_seen, SESSIONS, "every session's `done` streamed");
        agent_s.push((last - first_sent).as_secs_f64());
    }
    agent.shutdown(Duration::from_secs(2));
    let all_done = median(&agent_s);
    Ok(vec![Row {
        case: "concurrency".into(),
        metric: format!("{SESSIONS} sessions × `{script}` at once → all answered"),
        median: spread(&agent_s, "s", 3),
        baseline: format!(
            "{SESSIONS} × bash spawned at once: {}",
            spread(&raw_s, "s", 3)
        ),
        ratio: ratio(all_done, median(&raw_s)),
        target: "≤ 0.75 s".into(),
        met: Some(all_done <= 0.75),
    }])
}
